// The host's lease pool: GPU slots leased, renewed, expired, kept across restarts.

// Package gpu is a host's local GPU allocator: a lease takes one agent
// slot and specific device ids under a token, lives as long as its holder
// keeps renewing it, and is given back on release or when it expires.
package gpu

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"
)

// ErrNoCapacity means the host cannot give the devices now.
var ErrNoCapacity = errors.New("not enough free GPUs on this host")

// Lease is one holder's slot and devices.
type Lease struct {
	Token string `json:"token"`
	// Owner names the workflow execution that took the lease
	// ("workflow-id/run-id", "": unknown), so that a slot an ended
	// execution still holds can be taken back before its TTL.
	Owner   string    `json:"owner,omitempty"`
	Devices []int     `json:"devices,omitempty"`
	Since   time.Time `json:"since"`
	Renewed time.Time `json:"renewed"`
}

// Pool hands out the host's devices and its agent slots: a lease takes one
// slot and its devices, so a CPU-only host still runs a bounded number of
// agents at once. A lease not renewed for ttl is taken back: its run
// ended in a way that never released it (terminated, reset, its answer
// lost), and the slot must not wait for a worker restart.
type Pool struct {
	mu      sync.Mutex
	slots   int
	devices []int
	ttl     time.Duration
	now     func() time.Time
	file    string // where leases outlive the worker ("": nowhere)
	leases  map[string]*Lease
	changed func()
}

// Options configure a pool.
type Options struct {
	Slots   int
	Devices []int         // none: a CPU-only host
	TTL     time.Duration // 0: leases never expire
	// File keeps the leases across worker restarts: a restarted worker
	// honours them for one TTL, time for their holders to renew.
	File string
	Now  func() time.Time
	// Changed is told, under the pool's lock, that the leases changed; it
	// must not block.
	Changed func()
	// Torn is told when File could not be read as leases (a power loss
	// mid-write, a full disk): it was set aside and the pool starts
	// empty. Leases only matter for one TTL, so losing them is harmless,
	// while refusing to start would keep the worker down for good.
	Torn func(err error, setAside string)
}

// NewPool opens a pool, with the leases File holds.
func NewPool(o Options) (*Pool, error) {
	d := append([]int(nil), o.Devices...)
	sort.Ints(d)
	p := &Pool{slots: max(1, o.Slots), devices: d, ttl: o.TTL, now: o.Now, file: o.File, leases: map[string]*Lease{}, changed: o.Changed}
	if p.now == nil {
		p.now = time.Now
	}
	if p.file == "" {
		return p, nil
	}
	b, err := os.ReadFile(p.file)
	if errors.Is(err, os.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("leases: %w", err)
	}
	var kept []*Lease
	if err := json.Unmarshal(b, &kept); err != nil {
		aside := fmt.Sprintf("%s.torn-%d", p.file, p.now().UnixNano())
		if rerr := os.Rename(p.file, aside); rerr != nil {
			return nil, fmt.Errorf("leases %s: %w (and setting it aside: %v)", p.file, err, rerr)
		}
		if o.Torn != nil {
			o.Torn(fmt.Errorf("leases %s: %w", p.file, err), aside)
		}
		return p, nil
	}
	now := p.now()
	for _, l := range kept {
		if p.fits(l.Devices) && len(p.leases) < p.slots {
			l.Renewed = now // its holder has one TTL to show it is alive
			p.leases[l.Token] = l
		}
	}
	return p, nil
}

// Acquire leases n devices to token for owner. Acquiring again under the
// same token returns the same devices, so a redelivered lease request is
// harmless.
func (p *Pool) Acquire(token, owner string, n int) ([]int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expire()
	if l, ok := p.leases[token]; ok {
		l.Renewed = p.now()
		return slices.Clone(l.Devices), nil
	}
	if len(p.leases) >= p.slots {
		return nil, fmt.Errorf("%w: all %d agent slots are leased", ErrNoCapacity, p.slots)
	}
	free := p.free()
	if len(free) < n {
		return nil, fmt.Errorf("%w: want %d, %d of %d free", ErrNoCapacity, n, len(free), len(p.devices))
	}
	l := p.take(token, free[:n])
	l.Owner = owner
	return slices.Clone(l.Devices), p.save()
}

// Reclaim frees the leases whose owner has ended, as gone tells (asked
// without the lock held: it may be a call to the server). A terminated
// run never releases its slots; without this they would wait out the
// TTL while the same runs, resumed, queue behind them. It returns how
// many it freed.
func (p *Pool) Reclaim(gone func(owner string) bool) int {
	p.mu.Lock()
	owners := map[string]string{}
	for t, l := range p.leases {
		if l.Owner != "" {
			owners[t] = l.Owner
		}
	}
	p.mu.Unlock()
	ended := map[string]bool{}
	for _, o := range owners {
		if _, asked := ended[o]; !asked {
			ended[o] = gone(o)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for t, o := range owners {
		if l, ok := p.leases[t]; ok && l.Owner == o && ended[o] {
			delete(p.leases, t)
			n++
		}
	}
	if n > 0 {
		_ = p.save()
	}
	return n
}

// Claim makes sure token holds devices: renewed when it does, taken again
// when it lapsed and they are free (a worker restarted between the lease
// and the attempt), refused when another holder has them.
func (p *Pool) Claim(token string, devices []int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expire()
	if l, ok := p.leases[token]; ok {
		l.Renewed = p.now()
		return nil
	}
	if len(p.leases) >= p.slots || !p.fits(devices) {
		return fmt.Errorf("%w: the lease %s lapsed and its slot or devices %v are taken", ErrNoCapacity, token, devices)
	}
	p.take(token, devices)
	return p.save()
}

// Renew keeps token's lease alive; false when it has none.
func (p *Pool) Renew(token string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.leases[token]
	if ok {
		l.Renewed = p.now()
	}
	return ok
}

// Release frees a token's devices; releasing twice is harmless.
func (p *Pool) Release(token string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.leases[token]; !ok {
		return
	}
	delete(p.leases, token)
	_ = p.save() // a lease left in the file only lives one more TTL
}

// Leases lists the live leases, oldest first.
func (p *Pool) Leases() []Lease {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expire()
	out := make([]Lease, 0, len(p.leases))
	for _, l := range p.leases {
		c := *l
		c.Devices = slices.Clone(l.Devices)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out
}

// Occupancy is what a pool has handed out: agent slots and devices, each in
// use and free (what `starter hosts` shows, and the metrics export).
type Occupancy struct {
	SlotsInUse, SlotsFree     int
	DevicesInUse, DevicesFree int
}

// Occupancy counts the live leases against the slots and devices.
func (p *Pool) Occupancy() Occupancy {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expire()
	free := len(p.free())
	return Occupancy{SlotsInUse: len(p.leases), SlotsFree: max(0, p.slots-len(p.leases)), DevicesInUse: len(p.devices) - free, DevicesFree: free}
}

// Holder tells which token holds a device ("" when free).
func (p *Pool) Holder(device int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expire()
	for t, l := range p.leases {
		if slices.Contains(l.Devices, device) {
			return t
		}
	}
	return ""
}

func (p *Pool) take(token string, devices []int) *Lease {
	now := p.now()
	l := &Lease{Token: token, Devices: slices.Clone(devices), Since: now, Renewed: now}
	p.leases[token] = l
	return l
}

// expire drops the leases not renewed for the TTL.
func (p *Pool) expire() {
	if p.ttl <= 0 {
		return
	}
	cut := p.now().Add(-p.ttl)
	dropped := false
	for t, l := range p.leases {
		if l.Renewed.Before(cut) {
			delete(p.leases, t)
			dropped = true
		}
	}
	if dropped {
		_ = p.save()
	}
}

// free lists the devices no lease holds.
func (p *Pool) free() []int {
	var out []int
	for _, d := range p.devices {
		if p.holds(d) == "" {
			out = append(out, d)
		}
	}
	return out
}

func (p *Pool) holds(device int) string {
	for t, l := range p.leases {
		if slices.Contains(l.Devices, device) {
			return t
		}
	}
	return ""
}

// fits tells whether devices are this host's and free.
func (p *Pool) fits(devices []int) bool {
	for _, d := range devices {
		if !slices.Contains(p.devices, d) || p.holds(d) != "" {
			return false
		}
	}
	return true
}

// save writes the leases where a restarted worker finds them.
func (p *Pool) save() error {
	if p.changed != nil {
		p.changed()
	}
	if p.file == "" {
		return nil
	}
	out := make([]*Lease, 0, len(p.leases))
	for _, l := range p.leases {
		out = append(out, l)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("leases: %w", err)
	}
	if err := writeAtomic(p.file, b); err != nil {
		return fmt.Errorf("leases: %w", err)
	}
	return nil
}

// writeAtomic replaces path with b under a temporary name, renamed over
// path, so that a worker killed mid-write leaves the old file or the new
// one. It does not fsync: the file serves a worker restarted on a live
// host, whose page cache holds it. A power loss took the host's agents
// with it, and whatever it leaves (an older file, or a torn one, set
// aside) costs at most a slot held for one TTL or a holder leasing
// again. The two fsyncs at every acquire and release cost a no-op run
// 2 to 3 ms on a journaled ext4.
func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, b, 0o644)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}
