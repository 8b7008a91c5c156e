// A bundle without people's recordings and notes, unless asked.

package bundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// withoutPeople is a stored result without what a person wrote or is
// called: its notes left out, its people's labels replaced by their
// order. Numbers stay as stored (json.Number), and a result with neither
// is copied byte for byte.
func withoutPeople(r io.Reader) (io.Reader, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxEnvelope))
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	people, hasPeople := m["people"].([]any)
	if _, hasNotes := m["notes"]; !hasNotes && !hasPeople {
		return bytes.NewReader(b), nil
	}
	delete(m, "notes")
	for i := range people {
		people[i] = fmt.Sprintf("person %d", i+1)
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	return bytes.NewReader(out), nil
}
