package stripesim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// idempotencyTTL is how long Stripe keeps an idempotency key (it may prune keys
// once they are at least 24 hours old).
const idempotencyTTL = 24 * time.Hour

// Files inside the data directory.
const (
	journalFile = "stripesim.jsonl"
	lockFile    = "stripesim.lock"
)

// ErrDataDirInUse: another simulator holds the data directory.
var ErrDataDirInUse = errors.New("stripesim: data directory in use by another simulator")

// state is everything the simulator knows. It is guarded by Server.mu.
type state struct {
	seq       int64
	customers map[string]*custRecord
	pms       map[string]*pmRecord
	pis       map[string]*piRecord
	events    map[string]*eventRecord
	idem      map[string]*idemRecord
	ledger    []Payment
	ledgerIDs map[string]bool
}

func newState() *state {
	return &state{
		customers: map[string]*custRecord{},
		pms:       map[string]*pmRecord{},
		pis:       map[string]*piRecord{},
		events:    map[string]*eventRecord{},
		idem:      map[string]*idemRecord{},
		ledgerIDs: map[string]bool{},
	}
}

func (s *state) nextSeq() int64 {
	s.seq++
	return s.seq
}

// apply upserts a batch. Records are copied, so callers may keep theirs.
func (s *state) apply(b *batch) {
	if b == nil {
		return
	}
	for _, c := range b.Customers {
		c := c
		s.customers[c.Customer.ID] = &c
		s.seq = max(s.seq, c.Seq)
	}
	for _, p := range b.PMs {
		p := p
		s.pms[p.PM.ID] = &p
	}
	for _, p := range b.PIs {
		p := p
		s.pis[p.PI.ID] = &p
		s.seq = max(s.seq, p.Seq)
	}
	for _, e := range b.Events {
		e := e
		s.events[e.Event.ID] = &e
		s.seq = max(s.seq, e.Seq)
	}
	for _, r := range b.Idem {
		r := r
		s.idem[r.Key] = &r
	}
	for _, p := range b.Ledger {
		if !s.ledgerIDs[p.PaymentIntentID] {
			s.ledgerIDs[p.PaymentIntentID] = true
			s.ledger = append(s.ledger, p)
		}
	}
}

// pruneIdempotency forgets keys that have expired at now; the journal keeps
// them until the next compaction, which drops them too.
func (s *state) pruneIdempotency(now time.Time) {
	for k, r := range s.idem {
		if now.Sub(r.CreatedAt) >= idempotencyTTL {
			delete(s.idem, k)
		}
	}
}

// snapshot returns the whole state as one batch, leaving out idempotency keys
// that have expired at now.
func (s *state) snapshot(now time.Time) *batch {
	b := &batch{}
	for _, c := range s.customers {
		b.Customers = append(b.Customers, *c)
	}
	for _, p := range s.pms {
		b.PMs = append(b.PMs, *p)
	}
	for _, p := range s.pis {
		b.PIs = append(b.PIs, *p)
	}
	for _, e := range s.events {
		b.Events = append(b.Events, *e)
	}
	for _, r := range s.idem {
		if now.Sub(r.CreatedAt) < idempotencyTTL {
			b.Idem = append(b.Idem, *r)
		}
	}
	b.Ledger = append(b.Ledger, s.ledger...)
	return b
}

// journal appends batches to a file, one JSON line each, and syncs every line:
// a payment the simulator answered is never forgotten by a restart.
type journal struct {
	f    *os.File
	lock *os.File // holds an exclusive flock on the data directory
}

// loadJournal replays the journal in dir into a fresh state. A torn last line
// (a crash mid-write) is ignored; damage anywhere else is an error.
func loadJournal(path string) (*state, error) {
	st := newState()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stripesim: read state: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<30)
	line := 0
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var b batch
		if err := json.Unmarshal(sc.Bytes(), &b); err != nil {
			if !bytes.HasSuffix(data, []byte("\n")) && line == bytes.Count(data, []byte("\n"))+1 {
				break // torn final write
			}
			return nil, fmt.Errorf("stripesim: read state: %s line %d: %w", path, line, err)
		}
		st.apply(&b)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("stripesim: read state: %w", err)
	}
	return st, nil
}

// openJournal loads dir's state, rewrites it compacted (dropping expired
// idempotency keys), and opens the file for appending.
func openJournal(dir string, now time.Time) (*journal, *state, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("stripesim: open state: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, nil, err
	}
	j, st, err := openLocked(dir, now)
	if err != nil {
		lock.Close()
		return nil, nil, err
	}
	j.lock = lock
	return j, st, nil
}

// lockDir takes the data directory's lock, so two simulators never append to
// one journal (the lock goes with the process, even when it crashes).
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("stripesim: lock state: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrDataDirInUse, dir)
		}
		return nil, fmt.Errorf("stripesim: lock state: %w", err)
	}
	return f, nil
}

func openLocked(dir string, now time.Time) (*journal, *state, error) {
	path := filepath.Join(dir, journalFile)
	st, err := loadJournal(path)
	if err != nil {
		return nil, nil, err
	}
	snap := st.snapshot(now)
	tmp := path + ".tmp"
	if err := writeBatchFile(tmp, snap); err != nil {
		return nil, nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, nil, fmt.Errorf("stripesim: compact state: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("stripesim: open state: %w", err)
	}
	// Rebuild from the snapshot so the memory matches the file exactly.
	fresh := newState()
	fresh.apply(snap)
	fresh.seq = st.seq
	return &journal{f: f}, fresh, nil
}

func writeBatchFile(path string, b *batch) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("stripesim: compact state: %w", err)
	}
	if err := writeBatch(f, b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("stripesim: compact state: %w", err)
	}
	return f.Close()
}

func writeBatch(w io.Writer, b *batch) error {
	line, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("stripesim: encode state: %w", err)
	}
	if _, err := w.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("stripesim: write state: %w", err)
	}
	return nil
}

func (j *journal) append(b *batch) error {
	if j == nil || b.empty() {
		return nil
	}
	if err := writeBatch(j.f, b); err != nil {
		return err
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("stripesim: sync state: %w", err)
	}
	return nil
}

func (j *journal) close() error {
	if j == nil {
		return nil
	}
	err := j.f.Close()
	if j.lock != nil {
		j.lock.Close() // releases the flock
	}
	return err
}

// ReadLedger returns the successful payments recorded in a data directory, in
// the order they were made, without starting a simulator. billrun audit uses it
// to check a run against the simulator's truth rather than billrun's records.
func ReadLedger(dataDir string) ([]Payment, error) {
	st, err := loadJournal(filepath.Join(dataDir, journalFile))
	if err != nil {
		return nil, err
	}
	return st.ledger, nil
}
