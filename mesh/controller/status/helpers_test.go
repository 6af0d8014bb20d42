package status

import (
	"encoding/json"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

// The provisioner events the follower is handed, as the store's own
// tests of Status.Apply spell them.

var (
	since0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	said0  = since0.Add(5 * time.Minute)
)

// word is one provisioner event as it lies in EVENTS.
type word struct {
	subject string
	header  map[string][]string
	body    []byte
}

func failingWord(provider, consumer, node, class string, said time.Time) word {
	body, _ := json.Marshal(wire.FailingEvent{ConsumerRef: wire.ConsumerRef{Consumer: consumer, Node: node}, Class: class, Since: since0})
	return statusWord(provider, wire.EventProvisionerFailing, said, body)
}

func recoveredWord(provider, consumer, node string) word {
	body, _ := json.Marshal(wire.RecoveredEvent{ConsumerRef: wire.ConsumerRef{Consumer: consumer, Node: node}, Reason: wire.RecoveredSuccess})
	return statusWord(provider, wire.EventProvisionerRecovered, said0.Add(time.Hour), body)
}

func statusWord(provider, key string, said time.Time, body []byte) word {
	return word{
		subject: wire.EventSubject(provider, key),
		header: map[string][]string{
			wire.HeaderEventID:     {"evt-" + key + "-" + said.Format("150405")},
			wire.HeaderSource:      {provider},
			wire.HeaderNode:        {"node-p"},
			wire.HeaderTime:        {wire.FormatTime(said)},
			wire.HeaderContentType: {wire.ContentTypeJSON},
		},
		body: body,
	}
}
