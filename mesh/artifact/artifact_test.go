package artifact_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/artifact"
	"github.com/meshbus/mesh/mesh/build/buildtest"
	"github.com/meshbus/mesh/mesh/wire"
)

// pattern is size bytes that differ from chunk to chunk, so that a chunk
// read in the wrong place would show.
func pattern(size int, seed byte) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i/7) ^ seed
	}
	return b
}

// TestPutFetchRoundTrip stores artifacts as the builder, with the
// builder's grants alone, and reads them back as a host whose only grant
// is the direct get of ARTIFACTS.
func TestPutFetchRoundTrip(t *testing.T) {
	bed := buildtest.Start(t)
	ctx := buildtest.Context(t)
	seen := buildtest.NewViolations()
	js, err := jetstream.New(bed.Dial(buildtest.Builder, seen.Handler()))
	if err != nil {
		t.Fatal(err)
	}
	reader := bed.Dial(buildtest.Reader, seen.Handler())
	for _, size := range []int{1, wire.ArtifactChunkSize, 2*wire.ArtifactChunkSize + 12345} {
		data := pattern(size, byte(size))
		digest, chunks, err := artifact.Put(ctx, js, data)
		if err != nil {
			t.Fatalf("put %d bytes: %v", size, err)
		}
		if digest != wire.Digest(data) || chunks != wire.ChunksOf(int64(size)) {
			t.Fatalf("put %d bytes: expected %s in %d chunks, got %s in %d", size, wire.Digest(data), wire.ChunksOf(int64(size)), digest, chunks)
		}
		got, err := artifact.Fetch(ctx, reader, digest, int64(size))
		if err != nil {
			t.Fatalf("fetch %d bytes: %v", size, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("fetch %d bytes: expected the bytes put, got %d other bytes", size, len(got))
		}
	}
	if errs := seen.All(); len(errs) > 0 {
		t.Fatalf("expected no asynchronous errors (permissions), got %v", errs)
	}
}

// TestPutTwiceIsStoredOnce: a retry or a second build of the same bytes is
// deduplicated by the chunks' message ids.
func TestPutTwiceIsStoredOnce(t *testing.T) {
	bed := buildtest.Start(t)
	ctx := buildtest.Context(t)
	js := bed.JetStream()
	data := pattern(wire.ArtifactChunkSize+1, 3)
	for range 2 {
		if _, _, err := artifact.Put(ctx, js, data); err != nil {
			t.Fatal(err)
		}
	}
	s, err := js.Stream(ctx, wire.StreamArtifacts)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 || info.State.LastSeq != 2 {
		t.Fatalf("expected 2 chunks stored once (last sequence 2), got %d messages, last sequence %d", info.State.Msgs, info.State.LastSeq)
	}
}

// TestFetchRefusesAWrongDigest: bytes someone else wrote on an artifact's
// chunk subjects are not taken for it.
func TestFetchRefusesAWrongDigest(t *testing.T) {
	bed := buildtest.Start(t)
	ctx := buildtest.Context(t)
	js := bed.JetStream()
	reader := bed.Dial(buildtest.Reader)
	real := pattern(1000, 1)
	forged := pattern(1000, 2)
	digest := wire.Digest(real)
	if _, err := js.Publish(ctx, wire.ArtifactChunk(digest, 0), forged); err != nil {
		t.Fatal(err)
	}
	_, err := artifact.Fetch(ctx, reader, digest, int64(len(real)))
	if !errors.Is(err, artifact.ErrDigest) {
		t.Fatalf("expected ErrDigest, got %v", err)
	}
	for _, want := range []string{"declared " + digest, "fetched " + wire.Digest(forged)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("expected the error to name %q, got %v", want, err)
		}
	}
}

func TestFetchRefusesMissingAndMisSized(t *testing.T) {
	bed := buildtest.Start(t)
	ctx := buildtest.Context(t)
	js := bed.JetStream()
	reader := bed.Dial(buildtest.Reader)
	data := pattern(2*wire.ArtifactChunkSize+5, 9)
	digest, _, err := artifact.Put(ctx, js, data)
	if err != nil {
		t.Fatal(err)
	}

	// A declared size shorter than what is stored.
	if _, err := artifact.Fetch(ctx, reader, digest, int64(len(data)-1)); !errors.Is(err, artifact.ErrSize) || !strings.Contains(err.Error(), "chunk 2 of 3 holds 5 bytes, want 4") {
		t.Errorf("fetch with a short size: expected ErrSize naming chunk 2, got %v", err)
	}
	// Sizes out of bounds are refused before anything is asked.
	for _, size := range []int64{0, -1, wire.MaxArtifact + 1} {
		if _, err := artifact.Fetch(ctx, reader, digest, size); !errors.Is(err, artifact.ErrSize) {
			t.Errorf("fetch of size %d: expected ErrSize, got %v", size, err)
		}
	}
	if _, err := artifact.Fetch(ctx, reader, "sha256:nope", 1); err == nil || !strings.Contains(err.Error(), "is not a digest") {
		t.Errorf("fetch of a malformed digest: expected a refusal, got %v", err)
	}

	// A chunk gone from the stream.
	s, err := js.Stream(ctx, wire.StreamArtifacts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(wire.ArtifactChunk(digest, 1))); err != nil {
		t.Fatal(err)
	}
	_, err = artifact.Fetch(ctx, reader, digest, int64(len(data)))
	if !errors.Is(err, artifact.ErrMissing) || !strings.Contains(err.Error(), "chunk 1 of 3") {
		t.Errorf("fetch with chunk 1 purged: expected ErrMissing naming chunk 1, got %v", err)
	}
}

func TestPutRefusesBadSizes(t *testing.T) {
	ctx := buildtest.Context(t)
	// No bus is needed: the size is refused before anything is sent.
	for _, data := range [][]byte{nil, make([]byte, wire.MaxArtifact+1)} {
		if _, _, err := artifact.Put(ctx, nil, data); !errors.Is(err, artifact.ErrSize) {
			t.Errorf("put of %d bytes: expected ErrSize, got %v", len(data), err)
		}
	}
}

func TestFetchWithoutTheStream(t *testing.T) {
	bed := buildtest.Start(t)
	ctx := buildtest.Context(t)
	if err := bed.JetStream().DeleteStream(ctx, wire.StreamArtifacts); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := artifact.Fetch(ctx, bed.Dial(buildtest.Reader), wire.Digest([]byte("x")), 1)
	if err == nil || !strings.Contains(err.Error(), "does not answer direct gets") {
		t.Fatalf("expected a refusal saying ARTIFACTS does not answer, got %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("expected the refusal at once (no responders), got it after %s", time.Since(start))
	}
}

func TestSplitAndJoinRoundTripAndRefuseWhatIsNotTheArtifact(t *testing.T) {
	data := pattern(2*wire.ArtifactChunkSize+7, 3)
	digest, chunks, err := artifact.Split(data)
	if err != nil || len(chunks) != 3 || len(chunks[2]) != 7 {
		t.Fatalf("expected 3 chunks, the last of 7 bytes, got %d %v", len(chunks), err)
	}
	got, err := artifact.Join(digest, int64(len(data)), chunks)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("expected the artifact back, got %d bytes, %v", len(got), err)
	}
	if _, err := artifact.Join(digest, int64(len(data)), chunks[:2]); !errors.Is(err, artifact.ErrSize) {
		t.Errorf("a chunk missing: expected ErrSize, got %v", err)
	}
	short := [][]byte{chunks[0], chunks[1][1:], chunks[2]}
	if _, err := artifact.Join(digest, int64(len(data)), short); !errors.Is(err, artifact.ErrSize) {
		t.Errorf("a chunk short: expected ErrSize, got %v", err)
	}
	other := [][]byte{chunks[0], chunks[1], []byte("other!!")}
	_, err = artifact.Join(digest, int64(len(data)), other)
	if !errors.Is(err, artifact.ErrDigest) || !strings.Contains(err.Error(), digest) || !strings.Contains(err.Error(), wire.Digest(slices.Concat(other...))) {
		t.Errorf("other bytes: expected ErrDigest naming both digests, got %v", err)
	}
	if _, _, err := artifact.Split(nil); !errors.Is(err, artifact.ErrSize) {
		t.Errorf("nothing: expected ErrSize, got %v", err)
	}
}
