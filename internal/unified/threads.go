package unified

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// thread is a thread entity: a goroutine that runs the operations given to
// it by runOnThread, in order, until it is stopped. After an operation
// fails, it runs no more: the first failure is the thread's, and the test's.
type thread struct {
	id   string
	wake chan struct{} // a new operation, or stop; buffered
	done chan struct{} // closed when the goroutine ends

	mu      sync.Mutex
	queue   []func() error
	stopped bool  // no more operations
	err     error // the first failure
}

func newThread(id string) *thread {
	th := &thread{id: id, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go th.loop()
	return th
}

func (th *thread) loop() {
	defer close(th.done)
	for {
		th.mu.Lock()
		if len(th.queue) == 0 {
			stopped := th.stopped
			th.mu.Unlock()
			if stopped {
				return
			}
			<-th.wake
			continue
		}
		op := th.queue[0]
		th.queue = th.queue[1:]
		failed := th.err != nil
		th.mu.Unlock()
		if failed {
			continue
		}
		if err := op(); err != nil {
			th.mu.Lock()
			th.err = err
			th.mu.Unlock()
		}
	}
}

// run schedules an operation without waiting for it.
func (th *thread) run(op func() error) error {
	th.mu.Lock()
	defer th.mu.Unlock()
	if th.stopped {
		return fmt.Errorf("thread %q has been waited for: it runs no more operations", th.id)
	}
	th.queue = append(th.queue, op)
	th.signal()
	return nil
}

// stop tells the thread that no more operations come: it ends after those
// it has.
func (th *thread) stop() {
	th.mu.Lock()
	defer th.mu.Unlock()
	th.stopped = true
	th.signal()
}

func (th *thread) signal() {
	select {
	case th.wake <- struct{}{}:
	default:
	}
}

// errThreadTimeout is a thread that did not finish in time.
var errThreadTimeout = errors.New("did not finish its operations")

// wait stops the thread and waits for it to finish, for at most timeout,
// and returns its failure.
func (th *thread) wait(timeout time.Duration) error {
	th.stop()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-th.done:
	case <-timer.C:
		return fmt.Errorf("thread %q %w within %s", th.id, errThreadTimeout, timeout)
	}
	if th.err != nil {
		return fmt.Errorf("thread %q: %w", th.id, th.err)
	}
	return nil
}

// runOnThread schedules an entity operation on a thread.
func (r *testRun) runOnThread(where string, args bson.Raw) error {
	a := readObject(where+" arguments", docValue(args), []string{"thread", "operation"})
	id := a.str("thread", true)
	op, _ := a.value("operation", true)
	opDoc, ok := op.DocumentOK()
	if a.err == nil && !ok {
		a.fail("operation: want a document, got %s", show(op))
	}
	if a.err != nil {
		return a.err
	}
	if obj, _ := opDoc.Lookup("object").StringValueOK(); obj == "testRunner" {
		name, _ := opDoc.Lookup("name").StringValueOK()
		return fmt.Errorf("%s: runOnThread runs entity operations, not the special operation %q", where, name)
	}
	th, err := entity[*thread](r, where, id)
	if err != nil {
		return err
	}
	opWhere := fmt.Sprintf("%s on thread %q", where, id)
	if err := th.run(func() error { return r.operation(opWhere, op) }); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	return nil
}

// waitForThread waits for a thread's operations to finish, and fails with
// the first that failed.
func (r *testRun) waitForThread(where string, args bson.Raw) error {
	a := readObject(where+" arguments", docValue(args), []string{"thread"})
	id := a.str("thread", true)
	if a.err != nil {
		return a.err
	}
	th, err := entity[*thread](r, where, id)
	if err != nil {
		return err
	}
	if err := th.wait(r.waitTimeout); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	return nil
}
