package grant

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"
)

// Every resync of a ResourceClaim verifies its grant again: the same
// Datastore keys, the same signature, the same message. The curve
// arithmetic behind that (decoding each point, the cofactor check, the
// verification equation) is most of what a claim sync costs. Both checks
// are pure functions of their bytes, so their outcomes are remembered:
//
//   - points: what checkPoint said of 32 bytes, keyed by those bytes;
//   - verifications: whether a signature verified under a key, keyed by
//     the SHA-256 of the key, the signature and the message. Failures are
//     kept too: a Datastore that lists a retired key first fails with it
//     on every resync of a claim signed with the new one. An entry answers
//     for exactly the bytes it was made of.
//
// Each holds at most memoSize entries; a new entry past that evicts an
// arbitrary one, so a flood of claims costs CPU, never memory or
// correctness. 8,192 entries of each are about 1.5 MiB together, and
// cover a fleet with that many claims signed under a few keys.
const memoSize = 1 << 13

var (
	points        = newMemo[[32]byte, error](memoSize)
	verifications = newMemo[[32]byte, bool](memoSize)
)

// memo is a bounded, concurrency-safe map of remembered outcomes.
type memo[K comparable, V any] struct {
	mu  sync.Mutex
	m   map[K]V
	max int
}

func newMemo[K comparable, V any](max int) *memo[K, V] {
	return &memo[K, V]{m: make(map[K]V), max: max}
}

func (c *memo[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *memo[K, V]) put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[k] = v
}

// verificationKey names one verification: the key, the signature and the
// message, each length-prefixed so that no two triples share an input.
func verificationKey(pub, msg, sig []byte) [32]byte {
	h := sha256.New()
	var n [8]byte
	for _, part := range [][]byte{pub, sig, msg} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}
