package wire

import "testing"

func TestControlQueueSubjectIsControlQueuesInverse(t *testing.T) {
	for _, subject := range []string{SubjectEnrol, SubjectPush, SubjectBuilt, NodeReport("node-a"), NodeAlive("node-b"), SourceChanged("modules")} {
		q, err := ControlQueue(subject)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := ControlQueueSubject(q); !ok || got != subject {
			t.Errorf("queue %s: expected subject %s, got %q (%v)", q, subject, got, ok)
		}
	}
	for _, q := range []string{NodeQueue("node-a"), QueueBuilds, EnrolQueue("tok-1"), CredentialsQueue("node-a"), "control", "control..push", "control.*.report", AMQPObserverQueuePrefix + "x"} {
		if got, ok := ControlQueueSubject(q); ok {
			t.Errorf("queue %s: expected no control subject, got %s", q, got)
		}
	}
}

func TestTraceKey(t *testing.T) {
	kind, name, err := ParseTraceKey(TraceKey(TraceDeliver, "control.node-a.report"))
	if err != nil || kind != TraceDeliver || name != "control.node-a.report" {
		t.Fatalf("expected deliver of control.node-a.report, got %q %q %v", kind, name, err)
	}
	kind, name, err = ParseTraceKey(TraceKey(TracePublish, ExchangeControl))
	if err != nil || kind != TracePublish || name != ExchangeControl {
		t.Fatalf("expected publish to %s, got %q %q %v", ExchangeControl, kind, name, err)
	}
	for _, bad := range []string{"", "publish", "get.x", "deliverx.q"} {
		if _, _, err := ParseTraceKey(bad); err == nil {
			t.Errorf("%q: expected refused", bad)
		}
	}
}
