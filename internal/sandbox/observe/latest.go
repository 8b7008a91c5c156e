// Latest holds the last sample of each of a host's GPUs that an attempt sampled, for the worker's Prometheus endpoint.

package observe

import (
	"sort"
	"sync"
	"time"
)

// Latest holds the last sample of each of a host's GPUs that an attempt
// sampled, for the worker's Prometheus endpoint: a device no attempt has
// sampled for MaxAge (its lease ended) is left out.
type Latest struct {
	MaxAge time.Duration
	now    func() time.Time

	mu   sync.Mutex
	last map[int]GPUSample
}

// NewLatest keeps samples for maxAge.
func NewLatest(maxAge time.Duration) *Latest {
	return &Latest{MaxAge: maxAge, now: time.Now, last: map[int]GPUSample{}}
}

// Set records samples (nil Latest: nowhere).
func (l *Latest) Set(samples []GPUSample) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range samples {
		l.last[s.Index] = s
	}
}

// Fresh are the devices' last samples younger than MaxAge, by index.
func (l *Latest) Fresh() []GPUSample {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []GPUSample
	for d, s := range l.last {
		if l.now().Sub(s.At) > l.MaxAge {
			delete(l.last, d)
			continue
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}
