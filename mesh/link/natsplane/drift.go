package natsplane

import (
	"fmt"
	"slices"
	"strings"

	"github.com/meshbus/mesh/mesh/link/plane"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrDrift is wrapped by the refusal of a stream or consumer whose actual
// configuration differs from the desired one on a field the server cannot
// update (retention to or from work queue, storage, a consumer's durable
// name, deliver or ack policy, pull versus push). The controller does not
// delete and recreate it, which would lose what it holds: an operator must.
var ErrDrift = plane.ErrDrift

// fieldDiff is one managed field whose actual value is not the desired one.
type fieldDiff struct {
	field     string
	expected  string
	actual    string
	updatable bool
}

func (d fieldDiff) String() string {
	return fmt.Sprintf("%s: expected %s, got %s", d.field, d.expected, d.actual)
}

func diffNames(ds []fieldDiff) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.field
	}
	return out
}

// driftError names the object and every field that cannot be updated.
func driftError(what string, ds []fieldDiff) error {
	var parts []string
	for _, d := range ds {
		if !d.updatable {
			parts = append(parts, d.String())
		}
	}
	if parts == nil {
		return nil
	}
	return fmt.Errorf("%w: %s: %s", ErrDrift, what, strings.Join(parts, "; "))
}

// differ accumulates the diffs of one object.
type differ []fieldDiff

func (d *differ) add(field string, expected, actual any, updatable bool) {
	e, a := fmt.Sprint(expected), fmt.Sprint(actual)
	if e != a {
		*d = append(*d, fieldDiff{field: field, expected: e, actual: a, updatable: updatable})
	}
}

// limit normalises a size limit: the server stores "unlimited" as -1
// whatever non-positive value it was given.
func limit(v int64) int64 {
	if v <= 0 {
		return -1
	}
	return v
}

func sortedSet(items ...string) []string {
	var out []string
	for _, s := range items {
		if s != "" {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// streamDiffs compares the fields the controller sets; fields it leaves
// to the server's defaults are not its business. Duplicates is compared
// only where set, since the server derives its default from MaxAge.
func streamDiffs(want, got jetstream.StreamConfig) []fieldDiff {
	var d differ
	d.add("subjects", sortedSet(want.Subjects...), sortedSet(got.Subjects...), true)
	d.add("retention", want.Retention, got.Retention,
		want.Retention != jetstream.WorkQueuePolicy && got.Retention != jetstream.WorkQueuePolicy)
	d.add("storage", want.Storage, got.Storage, false)
	d.add("max_age", want.MaxAge, got.MaxAge, true)
	d.add("max_bytes", limit(want.MaxBytes), limit(got.MaxBytes), true)
	d.add("max_msgs", limit(want.MaxMsgs), limit(got.MaxMsgs), true)
	d.add("max_msgs_per_subject", limit(want.MaxMsgsPerSubject), limit(got.MaxMsgsPerSubject), true)
	d.add("max_msg_size", limit(int64(want.MaxMsgSize)), limit(int64(got.MaxMsgSize)), true)
	d.add("discard", want.Discard, got.Discard, true)
	d.add("discard_new_per_subject", want.DiscardNewPerSubject, got.DiscardNewPerSubject, true)
	if want.Duplicates != 0 {
		d.add("duplicate_window", want.Duplicates, got.Duplicates, true)
	}
	return d
}

// correctedStream is the actual configuration with the managed fields set
// to the desired values: what is not ours is kept as the server has it.
func correctedStream(want, got jetstream.StreamConfig) jetstream.StreamConfig {
	c := got
	c.Subjects = want.Subjects
	c.Retention = want.Retention
	c.MaxAge = want.MaxAge
	c.MaxBytes = want.MaxBytes
	c.MaxMsgs = want.MaxMsgs
	c.MaxMsgsPerSubject = want.MaxMsgsPerSubject
	c.MaxMsgSize = want.MaxMsgSize
	c.Discard = want.Discard
	c.DiscardNewPerSubject = want.DiscardNewPerSubject
	if want.Duplicates != 0 {
		c.Duplicates = want.Duplicates
	}
	return c
}

// filters gathers a consumer's filters whichever field carries them: the
// client moves a single filter into FilterSubject.
func filters(c jetstream.ConsumerConfig) []string {
	return sortedSet(append([]string{c.FilterSubject}, c.FilterSubjects...)...)
}

func maxDeliver(v int) int {
	if v <= 0 {
		return -1
	}
	return v
}

// consumerDiffs compares the fields the controller sets on a consumer.
func consumerDiffs(want, got jetstream.ConsumerConfig) []fieldDiff {
	var d differ
	d.add("durable_name", want.Durable, got.Durable, false)
	d.add("deliver_policy", want.DeliverPolicy, got.DeliverPolicy, false)
	d.add("ack_policy", want.AckPolicy, got.AckPolicy, false)
	d.add("deliver_subject (pull consumer)", want.DeliverSubject, got.DeliverSubject, false)
	d.add("mem_storage", want.MemoryStorage, got.MemoryStorage, false)
	d.add("filter_subjects", filters(want), filters(got), true)
	d.add("max_deliver", maxDeliver(want.MaxDeliver), maxDeliver(got.MaxDeliver), true)
	if want.AckWait != 0 {
		d.add("ack_wait", want.AckWait, got.AckWait, true)
	}
	if want.MaxAckPending != 0 {
		d.add("max_ack_pending", want.MaxAckPending, got.MaxAckPending, true)
	}
	return d
}

// correctedConsumer is the actual configuration with the managed,
// updatable fields set to the desired values.
func correctedConsumer(want, got jetstream.ConsumerConfig) jetstream.ConsumerConfig {
	c := got
	c.FilterSubject = ""
	c.FilterSubjects = want.FilterSubjects
	if len(want.FilterSubjects) == 0 {
		c.FilterSubject = want.FilterSubject
	}
	c.MaxDeliver = want.MaxDeliver
	if want.AckWait != 0 {
		c.AckWait = want.AckWait
	}
	if want.MaxAckPending != 0 {
		c.MaxAckPending = want.MaxAckPending
	}
	return c
}

// ConsumerFilters are a consumer's filter subjects, sorted, however the
// configuration spells them (one FilterSubject or FilterSubjects).
func ConsumerFilters(c jetstream.ConsumerConfig) []string { return filters(c) }
