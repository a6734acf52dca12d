package lograte

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLimiter(t *testing.T) {
	var out bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})), 10*time.Second)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	ctx := context.Background()
	for range 1000 {
		l.Log(ctx, "auth/missing", slog.LevelInfo, "refused")
	}
	l.Log(ctx, "auth/invalid", slog.LevelInfo, "refused")
	now = now.Add(11 * time.Second)
	l.Log(ctx, "auth/missing", slog.LevelInfo, "refused")
	want := []string{
		"level=INFO msg=refused",
		"level=INFO msg=refused",
		"level=INFO msg=refused suppressed=999",
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSpace(out.String()), "\n")); diff != "" {
		t.Errorf("1000 lines of one key, 1 of another, then one after the interval: -want, +got:\n%s", diff)
	}
}

func TestLimiterBoundsKeys(t *testing.T) {
	l := New(slog.New(slog.DiscardHandler), time.Minute)
	for i := range 3 * maxKeys {
		l.Log(context.Background(), strings.Repeat("k", i%97)+string(rune('a'+i%26))+string(rune(i)), slog.LevelInfo, "x")
	}
	if n := len(l.keys); n > maxKeys {
		t.Errorf("%d keys kept, want at most %d", n, maxKeys)
	}
}
