package server

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func TestBodyBufferSize(t *testing.T) {
	for _, c := range []struct{ n, want int64 }{
		{0, 4 << 10},
		{1, 4 << 10},
		{4 << 10, 4 << 10},
		{4<<10 + 1, 8 << 10},
		{18 << 10, 32 << 10},
		{64 << 10, 64 << 10},
		{1 << 20, 1 << 20},
		// Over every class: exactly what was asked, and not pooled.
		{1<<20 + 1, 1<<20 + 1},
	} {
		if got := bodyBufferSize(c.n); got != c.want {
			t.Errorf("bodyBufferSize(%d) = %d, want %d", c.n, got, c.want)
		}
		if got := cap(getBodyBuffer(c.n)); int64(got) != c.want {
			t.Errorf("cap(getBodyBuffer(%d)) = %d, want %d", c.n, got, c.want)
		}
	}
}

// TestReadAllBudget reads bodies of known and unknown length, one byte at
// a time so that every growth step is taken, and checks the bytes, the
// budget held while the body is kept, and that the budget and the pool get
// everything back.
func TestReadAllBudget(t *testing.T) {
	for _, c := range []struct {
		name     string
		size     int
		announce bool
		held     int64
	}{
		{"announced small", 100, true, 4 << 10},
		// Announced: the first buffer fits the body and one more byte.
		{"announced 18 KiB", 18 << 10, true, 32 << 10},
		// Unknown length: doubling from 4 KiB; only the last buffer is held.
		{"unknown 18 KiB", 18 << 10, false, 32 << 10},
		// Past firstBodyBuffer the buffer doubles, but never past the
		// announced length (and its one more byte).
		{"announced 100 KiB", 100 << 10, true, 128 << 10},
		// A maximum-size body is held in one buffer of its size, not in
		// one of twice that: the doubling stops at the announced length.
		{"announced 8 MiB", 8 << 20, true, 8<<20 + 1},
		{"announced 3 MiB", 3 << 20, true, 3<<20 + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := bytes.Repeat([]byte("0123456789abcdef"), c.size/16+1)[:c.size]
			size := int64(-1)
			if c.announce {
				size = int64(len(want))
			}
			budget := newByteBudget(1<<30, nil)
			got, held, err := readAll(iotest.OneByteReader(bytes.NewReader(want)), size, budget)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes that differ from the %d sent", len(got), len(want))
			}
			if held != c.held || budget.used != c.held {
				t.Errorf("held %d, budget used %d; want both %d", held, budget.used, c.held)
			}
			// While a buffer is copied into the next one both are held:
			// at most the last two, one half the size of the other (or
			// the announced length), so the peak stays under twice what
			// is held at the end.
			if c.announce && budget.peak >= 2*c.held {
				t.Errorf("peak held %d for a body held in %d, want under %d", budget.peak, c.held, 2*c.held)
			}
			budget.release(held)
			if budget.used != 0 {
				t.Errorf("budget used %d after release, want 0", budget.used)
			}
		})
	}
}

// TestBodyBufferWiped: a buffer goes back to the pool wiped, whatever it
// held.
func TestBodyBufferWiped(t *testing.T) {
	secret := strings.Repeat("s3cr3t", 1000)
	buf, _, err := readAll(strings.NewReader(secret), int64(len(secret)), nil)
	if err != nil {
		t.Fatal(err)
	}
	body := &bufferedBody{raw: buf}
	body.release()
	if got := bytes.Count(buf[:len(secret)], []byte{0}); got != len(secret) {
		t.Errorf("%d of %d bytes wiped after release", got, len(secret))
	}
	if body.raw != nil {
		t.Error("the released body still refers to its buffer")
	}
	if n, err := body.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Errorf("read after release: %d, %v; want 0, EOF", n, err)
	}
}

func TestReadAllOverBudget(t *testing.T) {
	budget := newByteBudget(16<<10, nil)
	_, held, err := readAll(strings.NewReader(strings.Repeat("x", 20<<10)), -1, budget)
	if diff := cmp.Diff(errBudget.Error(), errString(err)); diff != "" {
		t.Errorf("error: -want, +got:\n%s", diff)
	}
	// 8 KiB were held when the step to 16 KiB went over; the caller
	// releases what readAll reports.
	budget.release(held)
	if budget.used != 0 {
		t.Errorf("budget used %d after release, want 0", budget.used)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
