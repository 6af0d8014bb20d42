// Package artifact stores a built artifact in ARTIFACTS and reads it back
// (design 25 §1, §9 step 4). An artifact is named by its digest
// (wire.Digest) and kept in chunks of wire.ArtifactChunkSize, chunk n on
// wire.ArtifactChunk(digest, n); ARTIFACTS keeps the newest message of
// each subject and answers direct gets, so a reader needs one grant, the
// direct get of its artifact's chunks, and nothing else of JetStream.
//
// The builder writes (Put); a host reads (Fetch) and trusts nothing it
// reads until the bytes hash to the digest it was told: whoever may
// publish under mesh.artifact.> could have written a chunk.
package artifact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meshbus/mesh/mesh/wire"
)

// Sentinel errors callers branch on.
var (
	// ErrDigest means the bytes read do not hash to the digest asked for.
	ErrDigest = errors.New("artifact digest mismatch")
	// ErrMissing means a chunk of the artifact is not in ARTIFACTS.
	ErrMissing = errors.New("artifact chunk missing")
	// ErrSize means an artifact is empty or larger than wire.MaxArtifact,
	// or its chunks do not add up to the size declared.
	ErrSize = errors.New("artifact size")
)

// DefaultTimeout bounds one chunk's publish or read when the context has
// no deadline of its own.
const DefaultTimeout = 10 * time.Second

// ChunkID is the JetStream message id of chunk n of the artifact of
// digest: a chunk published again (a retry, a second build of the same
// revision) within the stream's duplicate window is stored once.
func ChunkID(digest string, n int) string { return digest + "/" + strconv.Itoa(n) }

// Put stores data in ARTIFACTS through js, chunk by chunk, each publish
// confirmed by the stream before the next, and returns the artifact's
// digest and how many chunks hold it. Put is idempotent: the same bytes
// give the same subjects, message ids and contents.
func Put(ctx context.Context, js jetstream.JetStream, data []byte) (digest string, chunks int, err error) {
	digest, parts, err := Split(data)
	if err != nil {
		return "", 0, fmt.Errorf("put artifact: %w", err)
	}
	for n, chunk := range parts {
		if err := putChunk(ctx, js, digest, n, chunk); err != nil {
			return "", 0, fmt.Errorf("put artifact %s: chunk %d of %d: %w", digest, n, len(parts), err)
		}
	}
	return digest, len(parts), nil
}

// Split is data's digest and its chunks, wire.ArtifactChunkSize bytes
// each but the last: what a builder stores, on either bus.
func Split(data []byte) (digest string, chunks [][]byte, err error) {
	if err := checkSize(int64(len(data))); err != nil {
		return "", nil, err
	}
	for lo := 0; lo < len(data); lo += wire.ArtifactChunkSize {
		chunks = append(chunks, data[lo:min(lo+wire.ArtifactChunkSize, len(data))])
	}
	return wire.Digest(data), chunks, nil
}

// Join is the artifact of digest, size bytes long, put together from its
// chunks as a host read them, on either bus: each chunk must be its
// place's size, and the whole must hash to digest (ErrSize, ErrDigest
// naming both digests). Nothing read is trusted before that.
func Join(digest string, size int64, chunks [][]byte) ([]byte, error) {
	if err := checkSize(size); err != nil {
		return nil, err
	}
	want := wire.ChunksOf(size)
	if len(chunks) != want {
		return nil, fmt.Errorf("%w: %d chunks for an artifact of %d bytes, want %d", ErrSize, len(chunks), size, want)
	}
	data := make([]byte, 0, size)
	for n, chunk := range chunks {
		if got, want := int64(len(chunk)), chunkSize(size, n); got != want {
			return nil, fmt.Errorf("%w: chunk %d of %d holds %d bytes, want %d for an artifact of %d bytes", ErrSize, n, len(chunks), got, want, size)
		}
		data = append(data, chunk...)
	}
	if got := wire.Digest(data); got != digest {
		return nil, fmt.Errorf("%w: declared %s, fetched %s", ErrDigest, digest, got)
	}
	return data, nil
}

// chunkSize is how many bytes chunk n of an artifact of size bytes holds.
func chunkSize(size int64, n int) int64 {
	return min(int64(wire.ArtifactChunkSize), size-int64(n)*wire.ArtifactChunkSize)
}

func putChunk(ctx context.Context, js jetstream.JetStream, digest string, n int, chunk []byte) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	ack, err := js.Publish(ctx, wire.ArtifactChunk(digest, n), chunk,
		jetstream.WithMsgID(ChunkID(digest, n)),
		// The server refuses the chunk unless ARTIFACTS is what takes it.
		jetstream.WithExpectStream(wire.StreamArtifacts))
	if err != nil {
		return err
	}
	// A reply subject is not checked by the server (NATS-NOTES): an
	// acknowledgement from any other stream is not ours.
	if ack.Stream != wire.StreamArtifacts {
		return fmt.Errorf("acknowledged by stream %q, not %s", ack.Stream, wire.StreamArtifacts)
	}
	return nil
}

// Fetch reads the artifact of digest, declared size bytes long, from
// ARTIFACTS by direct gets on nc (wire.DirectGetLast on each chunk's
// subject) and returns its bytes once they hash to digest. A chunk not
// there is ErrMissing; a size out of bounds, or chunks that do not add up
// to it, ErrSize; bytes of another digest ErrDigest, naming both.
func Fetch(ctx context.Context, nc *nats.Conn, digest string, size int64) ([]byte, error) {
	if err := wire.CheckDigest(digest); err != nil {
		return nil, fmt.Errorf("fetch artifact: %w", err)
	}
	if err := checkSize(size); err != nil {
		return nil, fmt.Errorf("fetch artifact %s: %w", digest, err)
	}
	chunks := make([][]byte, wire.ChunksOf(size))
	for n := range chunks {
		chunk, err := getChunk(ctx, nc, digest, n)
		if err != nil {
			return nil, fmt.Errorf("fetch artifact %s: chunk %d of %d: %w", digest, n, len(chunks), err)
		}
		// A chunk of the wrong size is refused before the next is read.
		if got, want := int64(len(chunk)), chunkSize(size, n); got != want {
			return nil, fmt.Errorf("fetch artifact %s: %w: chunk %d of %d holds %d bytes, want %d for an artifact of %d bytes", digest, ErrSize, n, len(chunks), got, want, size)
		}
		chunks[n] = chunk
	}
	data, err := Join(digest, size, chunks)
	if err != nil {
		return nil, fmt.Errorf("fetch artifact: %w", err)
	}
	return data, nil
}

func getChunk(ctx context.Context, nc *nats.Conn, digest string, n int) ([]byte, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	subject := wire.ArtifactChunk(digest, n)
	msg, err := nc.RequestWithContext(ctx, wire.DirectGetLast(wire.StreamArtifacts, subject), nil)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("%s does not answer direct gets (no stream, or direct gets not allowed): %w", wire.StreamArtifacts, err)
	}
	if err != nil {
		return nil, fmt.Errorf("direct get %s: %w", subject, err)
	}
	// A status is the server's answer, and it comes without a body; a
	// stored chunk may carry any header its publisher put, so a status
	// header beside a body is not taken for one.
	if status := msg.Header.Get(wire.HeaderNATSStatus); status != "" && len(msg.Data) == 0 {
		if status == "404" {
			return nil, fmt.Errorf("%w: %s holds nothing on %s", ErrMissing, wire.StreamArtifacts, subject)
		}
		return nil, fmt.Errorf("direct get %s: status %s %s", subject, status, msg.Header.Get(wire.HeaderNATSDescription))
	}
	// The server names the stream and the subject the message was stored
	// on; anything else answering there is not the stream.
	if got := msg.Header.Values(jetstream.StreamHeader); len(got) != 1 || got[0] != wire.StreamArtifacts {
		return nil, fmt.Errorf("direct get %s: answer names stream %q, not %s", subject, got, wire.StreamArtifacts)
	}
	if got := msg.Header.Values(jetstream.SubjectHeader); len(got) != 1 || got[0] != subject {
		return nil, fmt.Errorf("direct get %s: answer is of subject %q", subject, got)
	}
	return bytes.Clone(msg.Data), nil
}

func checkSize(size int64) error {
	if size <= 0 || size > wire.MaxArtifact {
		return fmt.Errorf("%w: %d bytes, want 1..%d", ErrSize, size, wire.MaxArtifact)
	}
	return nil
}

// bounded is ctx, with DefaultTimeout when it has no deadline.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}
