package grant

import (
	"crypto/ed25519"
	"testing"
)

// len is how many entries m holds.
func (c *memo[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// TestMemoBounded: past its size a memo evicts instead of growing, and
// keeps the entry just made.
func TestMemoBounded(t *testing.T) {
	m := newMemo[int, bool](8)
	for i := range 100 {
		m.put(i, i%2 == 0)
		if n := m.len(); n > 8 {
			t.Fatalf("after %d entries the memo holds %d, more than its 8", i+1, n)
		}
		if v, ok := m.get(i); !ok || v != (i%2 == 0) {
			t.Fatalf("entry %d is not kept: get() = %v, %v", i, v, ok)
		}
	}
	m.put(99, false)
	if n := m.len(); n != 8 {
		t.Errorf("replacing an entry changed the size to %d, want 8", n)
	}
}

// TestVerificationKey: the key, signature and message are length-prefixed,
// so moving bytes from one to the next names another verification.
func TestVerificationKey(t *testing.T) {
	a := verificationKey([]byte("ab"), []byte("m"), []byte("c"))
	if b := verificationKey([]byte("a"), []byte("m"), []byte("bc")); a == b {
		t.Error("verificationKey(ab, m, c) = verificationKey(a, m, bc)")
	}
	if b := verificationKey([]byte("ab"), []byte("cm"), []byte("")); a == b {
		t.Error("verificationKey(ab, m, c) = verificationKey(ab, cm, \"\")")
	}
}

// TestVerifyRemembers: a verification is done once per key, message and
// signature; each of them changed is a verification of its own, whose
// outcome is not the remembered one.
func TestVerifyRemembers(t *testing.T) {
	pub, priv, err := GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("formspec TestVerifyRemembers")
	sig := ed25519.Sign(priv, msg)
	before := verifications.len()
	for range 3 {
		if !Verify(pub, msg, sig) {
			t.Fatal("an honest signature does not verify")
		}
	}
	if n := verifications.len() - before; n != 1 {
		t.Errorf("three verifications of the same bytes made %d entries, want 1", n)
	}
	other := append([]byte{}, msg...)
	other[0] ^= 1
	tampered := append([]byte{}, sig...)
	tampered[40] ^= 1
	for range 2 {
		if Verify(pub, other, sig) {
			t.Error("the signature verifies another message")
		}
		if Verify(pub, msg, tampered) {
			t.Error("a tampered signature verifies")
		}
	}
	if !Verify(pub, msg, sig) {
		t.Error("the honest signature no longer verifies")
	}
}
