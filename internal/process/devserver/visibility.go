// The embedded server's visibility indexes.

package devserver

import (
	"database/sql"
	"fmt"
	"net/url"
	"strings"

	// The driver the server's SQLite plugin uses, registered as "sqlite".
	_ "modernc.org/sqlite"
)

// visibilityIndexes are the indexes of the visibility table the embedded
// server keeps: the Web UI's default list and its sorts and counts
// (close and start time, execution time, status), lookups by workflow id
// and type, and the keyword columns mlrb's search attributes (MlrbTask,
// MlrbPhase, ...) are mapped to, whichever of them a database chose.
var visibilityIndexes = map[string]bool{
	"default_idx": true, "by_execution_time": true, "by_workflow_id": true, "by_workflow_type": true, "by_status": true,
}

// keptIndex tells whether the embedded server keeps a visibility index.
func keptIndex(name string) bool {
	return visibilityIndexes[name] || strings.HasPrefix(name, "by_keyword_")
}

// trimVisibility drops the visibility table's other indexes from the
// SQLite file. Temporal's schema indexes every pre-allocated search
// attribute (58 indexes), and each visibility write is a REPLACE, a
// delete and an insert in every one of them: a run writes its record 8
// times, and that was a sixth of the embedded server's CPU. A query on a
// column left unindexed still answers, by a scan of the namespace's rows.
// It runs at every start, so a database made before the trim is trimmed.
func trimVisibility(file string) error {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: file}).EscapedPath()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("devserver: open %s: %w", file, err)
	}
	defer func() { _ = db.Close() }()
	names, err := visibilityIndexNames(db)
	if err != nil {
		return fmt.Errorf("devserver: %s: %w", file, err)
	}
	for _, name := range names {
		if keptIndex(name) {
			continue
		}
		// Names come from the schema and are plain identifiers; quoted
		// all the same.
		if _, err := db.Exec(`DROP INDEX IF EXISTS "` + strings.ReplaceAll(name, `"`, `""`) + `"`); err != nil {
			return fmt.Errorf("devserver: drop visibility index %s in %s: %w", name, file, err)
		}
	}
	return nil
}

// visibilityIndexNames lists the visibility table's own indexes (not the
// primary key's), by name.
func visibilityIndexNames(db *sql.DB) ([]string, error) {
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'executions_visibility' AND sql IS NOT NULL ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list visibility indexes: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("list visibility indexes: %w", err)
		}
		names = append(names, name)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list visibility indexes: %w", err)
	}
	return names, nil
}
