package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// The build path on AMQP (docs/decisions/0011), in the control plane's
// virtual host beside docs/decisions/0009's queues:
//
//   - A fetch: the builder puts the request (FetchRequest) through
//     ExchangeControl with key SourceFetch(repo) into
//     SourceFetchQueue(repo), which that repository alone reads; the
//     repository answers (FetchAnswer) with key SourceFetched(repo) into
//     QueueFetched, which the builder alone reads. The key says which
//     repository answered (a topic permission: only it may write it), the
//     correlation id which fetch. No reply_to is followed.
//   - The artifacts: the builder puts each chunk with key
//     ArtifactChunk(digest, n) into QueueArtifacts, a stream the
//     controller alone reads. A host asks on NodeArtifact(node) with an
//     ArtifactRequest; the controller copies the chunks of an artifact
//     that node's declaration names into ArtifactsQueue(node), which the
//     host alone reads: as on NATS, a host reads its own artifacts and no
//     other's.

// Queues of the build path on AMQP.
const (
	// QueueArtifacts is the stream of every artifact's chunks (ARTIFACTS
	// on NATS), bound to ExchangeControl with BindingArtifacts.
	QueueArtifacts = "artifacts"
	// BindingArtifacts matches every chunk's key (ArtifactChunk).
	BindingArtifacts = "mesh.artifact.#"
	// QueueFetched is where the repositories' answers wait for the
	// builder, bound with BindingFetched.
	QueueFetched = "builder.fetched"
	// BindingFetched matches every repository's answer key.
	BindingFetched = "mesh.source.*.fetched"
)

// Queue arguments and headers of the artifacts on AMQP.
const (
	// QueueStream is ArgQueueType's value for a stream: read from an
	// offset, any number of times, never taken away.
	QueueStream = "stream"
	// ArgMaxLengthBytes bounds a queue (a stream: its retention) in bytes.
	ArgMaxLengthBytes = "x-max-length-bytes"
	// ArgStreamOffset is where a consumer of a stream starts
	// (StreamFromFirst, or an offset); a stream's delivery carries its
	// offset in the header of the same name.
	ArgStreamOffset = "x-stream-offset"
	StreamFromFirst = "first"
	// HeaderArtifactDigest and HeaderArtifactChunk say, on a chunk the
	// controller copied into a host's queue, which artifact and which
	// chunk (from 0) it is: the routing key there is the queue's name.
	HeaderArtifactDigest = "x-artifact-digest"
	HeaderArtifactChunk  = "x-artifact-chunk"
	// HeaderArtifactRefused, on a message of a host's artifact queue,
	// is the controller's refusal of its request, with the reason.
	HeaderArtifactRefused = "x-artifact-refused"
)

// NodeArtifact is where node's host asks the controller for an artifact
// on AMQP (ControlQueue gives its queue). NATS has no such subject: there
// a host's grant names its artifacts' chunks, and it reads them itself.
func NodeArtifact(node string) string { return "mesh.control." + node + ".artifact" }

// ArtifactsQueue is where the controller copies the artifacts node's
// host asked for: written by the controller alone through the default
// exchange, read by that host alone.
func ArtifactsQueue(node string) string { return "artifacts." + node }

// SourceFetchQueue is where repository repo's fetches wait for it, bound
// to ExchangeControl with SourceFetch(repo).
func SourceFetchQueue(repo string) string { return "source." + repo + ".fetch" }

// SourceFetched is the key repository repo answers a fetch with.
func SourceFetched(repo string) string { return "mesh.source." + repo + ".fetched" }

// ParseArtifactChunk reads a chunk's key (ArtifactChunk) back into its
// artifact's digest and the chunk's number.
func ParseArtifactChunk(key string) (digest string, n int, err error) {
	rest, ok := strings.CutPrefix(key, "mesh.artifact.")
	hex, num, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return "", 0, fmt.Errorf("%w: %q is not an artifact chunk's key", ErrBuild, key)
	}
	digest = digestPrefix + hex
	if err := CheckDigest(digest); err != nil {
		return "", 0, fmt.Errorf("%w: key %q: %v", ErrBuild, key, err)
	}
	n, err = strconv.Atoi(num)
	if err != nil || n < 0 || n >= ChunksOf(MaxArtifact) || strconv.Itoa(n) != num {
		return "", 0, fmt.Errorf("%w: key %q: chunk %q is not a number below %d", ErrBuild, key, num, ChunksOf(MaxArtifact))
	}
	return digest, n, nil
}

// ArtifactRequest is a host's request for an artifact on AMQP: the
// digest and size its declaration names.
type ArtifactRequest struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// ParseArtifactRequest reads an artifact request strictly.
func ParseArtifactRequest(data []byte) (ArtifactRequest, error) {
	var r ArtifactRequest
	if err := strict(data, MaxBuildMessage, &r); err != nil {
		return ArtifactRequest{}, err
	}
	if err := CheckDigest(r.Digest); err != nil {
		return ArtifactRequest{}, fmt.Errorf("%w: %v", ErrBuild, err)
	}
	if r.Size <= 0 || r.Size > MaxArtifact {
		return ArtifactRequest{}, fmt.Errorf("%w: size %d, want 1..%d", ErrBuild, r.Size, MaxArtifact)
	}
	return r, nil
}

// KeyQueue is the one queue of the control plane a message with key lands
// in: a control subject's queue (ControlQueue), a repository's fetch
// queue, or the builder's answers. An artifact's chunk lands in the
// stream, and a declaration in its node's queue; neither is asked here.
func KeyQueue(key string) (string, error) {
	if q, err := ControlQueue(key); err == nil {
		return q, nil
	}
	if rest, ok := strings.CutPrefix(key, "mesh.source."); ok {
		repo, kind, _ := strings.Cut(rest, ".")
		if CheckName(repo) == nil {
			switch kind {
			case "fetch":
				return SourceFetchQueue(repo), nil
			case "fetched":
				return QueueFetched, nil
			}
		}
	}
	return "", fmt.Errorf("%w: %q lands in no queue of its own", ErrNotControlSubject, key)
}
