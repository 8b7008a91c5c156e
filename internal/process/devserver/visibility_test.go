package devserver

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"go.temporal.io/server/common/config"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	sqliteschema "go.temporal.io/server/schema/sqlite"
)

// newSchema is a SQLite file holding Temporal's schema, as the embedded
// server makes it for a new state dir.
func newSchema(tb testing.TB) string {
	tb.Helper()
	file := filepath.Join(tb.TempDir(), "temporal.db")
	conf := &config.SQL{PluginName: sqliteplugin.PluginName, DatabaseName: file, ConnectAttributes: map[string]string{"mode": "rwc", "journal_mode": "wal"}}
	if err := sqliteschema.SetupSchema(conf); err != nil {
		tb.Fatal(err)
	}
	return file
}

func open(tb testing.TB, file string) *sql.DB {
	tb.Helper()
	db, err := sql.Open("sqlite", "file:"+file)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

func visibilityIndexesIn(t *testing.T, db *sql.DB) []string {
	t.Helper()
	names, err := visibilityIndexNames(db)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// replace writes run i's visibility record as the server does: a REPLACE
// of the whole row, its search attributes as JSON.
func replace(tb testing.TB, db *sql.DB, i int, phase string) {
	tb.Helper()
	sa, _ := json.Marshal(map[string]any{"Keyword01": "mini_baby_lm", "Keyword02": "noop", "Keyword03": phase, "TemporalChangeVersion": []string{"lean-run-2"}})
	_, err := db.Exec(`REPLACE INTO executions_visibility (namespace_id, run_id, start_time, execution_time, workflow_id, workflow_type_name, status, memo, encoding, task_queue, search_attributes, history_length)
		VALUES ('ns', ?, '2026-11-27 10:00:00+00:00', '2026-11-27 10:00:00+00:00', ?, 'RunWorkflow', 1, x'', 'Proto3', 'mlrb', ?, ?)`,
		fmt.Sprintf("run-%d", i), fmt.Sprintf("bench/noop/mini_baby_lm/s%d", i), string(sa), 30+i%7)
	if err != nil {
		tb.Fatal(err)
	}
}

// TestTrimVisibility: of Temporal's visibility indexes the embedded server
// keeps the Web UI's and the keyword columns', on a new database and again
// (a no-op) on one trimmed before; a query on a column it no longer
// indexes still answers, and the full-text triggers stay.
func TestTrimVisibility(t *testing.T) {
	file := newSchema(t)
	db := open(t, file)
	before := visibilityIndexesIn(t, db)
	if len(before) < 40 {
		t.Fatalf("Temporal's schema has %d visibility indexes; the test expects the full set", len(before))
	}
	for range 2 {
		if err := trimVisibility(file); err != nil {
			t.Fatal(err)
		}
	}
	after := visibilityIndexesIn(t, db)
	for _, n := range before {
		if keptIndex(n) != slices.Contains(after, n) {
			t.Fatalf("index %s: kept %v, left %v", n, keptIndex(n), after)
		}
	}
	if len(after) != 15 {
		t.Fatalf("%d indexes left, want 15 (5 and the 10 keyword columns'): %v", len(after), after)
	}
	for i := range 20 {
		replace(t, db, i, "running")
		replace(t, db, i, "done")
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM executions_visibility WHERE namespace_id = 'ns' AND history_length = 33 AND Keyword03 = 'done'`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("query on an unindexed column: %d rows, %v; want 3", n, err)
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'executions_visibility'`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("the full-text triggers: %d left, %v; want 3", n, err)
	}
}

// BenchmarkVisibilityWrite: one visibility write (a REPLACE, as the server
// makes one per run start, upsert and close) on Temporal's schema and on
// the trimmed one, in the server's SQLite driver.
func BenchmarkVisibilityWrite(b *testing.B) {
	for _, trim := range []bool{false, true} {
		b.Run(map[bool]string{false: "temporal-schema", true: "trimmed"}[trim], func(b *testing.B) {
			file := newSchema(b)
			if trim {
				if err := trimVisibility(file); err != nil {
					b.Fatal(err)
				}
			}
			db := open(b, file)
			i := 0
			for b.Loop() {
				replace(b, db, i%1000, "running")
				i++
			}
		})
	}
}
