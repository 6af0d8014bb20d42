@cutover
Feature: Cutover — the mesh moves from AMQP to the NATS server it adopted, in one rollout, and its neighbour notices nothing
  Design 25 §10, step 5. The mesh of the adoption bed: the controller's genesis on RabbitMQ, its
  state in PostgreSQL, a host on "node-a" and "node-b" enrolled over the broker, the predecessor's
  client on the same broker since before the mesh was raised, and the NATS server the operator
  raised beside the broker, adopted into seat mesh-broker. Its traffic runs throughout
  (testdata/cutover.yaml, stand-ins/traffic): on node-a the ticker emits a sequence-numbered
  event every 50 ms and serves a tool; on node-b the tally consumes those events and calls that
  tool every 100 ms; each keeps a ledger the bed copies out of the hosts' containers.

  `mesh-controller cutover` records the cutover under its next generation, and the running
  controller drives it through its phases (docs/decisions/0013-cutover.md): compose (every
  principal logs in to the adopted server, the streams and consumers are asserted there), prepare
  (every host proves it reaches NATS with its own new credential, fetched sealed to its key, and
  moves nothing), switch (every credential names NATS; each host moves, restarts its modules on
  their NATS credentials and reports on NATS, while the controller listens on both buses), retire
  (the mesh's users and virtual hosts removed from the broker, the predecessor's left). A node that
  cannot prove it reaches NATS stops the cutover before anything switches, named, and the mesh
  stays on AMQP.

  Every check reads the system from outside: the controller's status, the adopted server's
  monitoring, the broker's management API, the traffic's ledgers, and the witness of what the
  predecessor could notice (the adoption bed's).

  A scenario takes the cluster a scenario before it left, while no NATS server stands beside its
  broker; one that raises the server beside and adopts it leaves its cluster to none after it. So
  each scenario that needs the server adopted raises and adopts it itself, and each runs alone or
  beside the others (bedrun --parallel) alike.

  @refused
  Scenario: A cutover before the server beside the broker is adopted is refused, and nothing changes
    Given a mesh raised from nothing from "testdata/cutover.yaml"
    And the witness notes what the predecessor can notice
    Then a cutover is refused, saying "no NATS server holds seat mesh-broker"
    And status shows no cutover
    And the predecessor noticed nothing since the witness's note

  @move
  Scenario: The mesh moves to NATS in one rollout, its traffic goes on, nothing of it is left on the broker, and the predecessor notices nothing
    Given a mesh raised from nothing from "testdata/cutover.yaml"
    And the NATS server beside the broker was adopted into its seat
    And within 60 seconds every node reports on "amqp", as status shows
    And the witness notes what the predecessor can notice
    When the operator cuts the mesh over to NATS
    Then the cutover is done: every node proved it reaches NATS, then switched
    And within 30 seconds every node reports on "nats", as status shows
    And every host and every module it runs is connected to the adopted server as its own user
    And the broker holds nothing of the mesh: its virtual hosts, users and connections are the predecessor's and the administrators' alone
    And every event the ticker emitted throughout the cutover was consumed by the tally, none lost
    And the tally's calls of the ticker's tool failed only while the nodes switched, and are answered again
    And a cutover again is refused, saying "completed"
    And the predecessor noticed nothing since the witness's note
    And the predecessor noticed nothing since the broker was raised

  @partition
  Scenario: A node cut off during prepare stops the cutover, named, and the mesh stays on AMQP
    Given a mesh raised from nothing from "testdata/cutover.yaml"
    And the NATS server beside the broker was adopted into its seat
    And within 60 seconds every node reports on "amqp", as status shows
    And the witness notes what the predecessor can notice
    When the node-b is cut off from the private network
    And the operator cuts the mesh over to NATS within 10 seconds
    Then the cutover stopped, naming "node-b" not heard, and the mesh stays on AMQP
    When the node-b is healed
    Then within 60 seconds every node reports on "amqp", as status shows
    And no principal of the mesh is connected to the adopted server
    And the predecessor noticed nothing since the witness's note

  @resume
  Scenario: A node lost after the switch began is named and waited for; the controller killed in compose, in prepare and in switch resumes; the cutover ends as one never interrupted
    The adopted server paused holds compose: no principal's login is answered, and the cutover
    waits, saying so, with nothing declared to the hosts. It is paused once the cutover is begun
    (begun, the server must answer) and before the controller, stopped meanwhile, takes it up.
    The bound (--within) says when a node not heard on NATS since the switch is named overdue; it
    is still waited for, and switches once it is back (docs/decisions/0013-cutover.md, "past the
    bound"). node-a paused holds prepare while node-b proves it reaches NATS, so that node-b can be
    cut off before the switch reaches it. The controller killed in retire, which no fault from
    outside holds, is proved below the bed (mesh/controller/rollout,
    TestACutoverKilledAnywhereEndsAsOneNeverKilled).

    Given a mesh raised from nothing from "testdata/cutover.yaml"
    And the NATS server beside the broker was adopted into its seat
    And within 60 seconds every node reports on "amqp", as status shows
    And the witness notes what the predecessor can notice
    When the controller is stopped
    And the operator begins the cutover to NATS within 15 seconds
    And the adopted server is paused
    And the controller is started again
    Then within 60 seconds status shows the cutover held in compose, the mesh's principals not let in by the adopted server
    When the controller is killed with SIGKILL
    And the node-a is paused
    And the controller is started again
    And the adopted server is resumed
    Then within 30 seconds status shows "node-b" proved it reaches NATS, the cutover in prepare
    When the controller is killed with SIGKILL
    And the controller is started again
    And the node-b is cut off from the private network
    And the node-a is resumed
    Then within 60 seconds status shows the cutover switching, "node-b" named not heard on NATS
    When the controller is killed with SIGKILL
    And the controller is started again
    And the node-b is healed
    And the operator follows the cutover to its end
    Then the cutover is done: every node proved it reaches NATS, then switched
    And within 30 seconds every node reports on "nats", as status shows
    And every host and every module it runs is connected to the adopted server as its own user
    And the broker holds nothing of the mesh: its virtual hosts, users and connections are the predecessor's and the administrators' alone
    And every event the ticker emitted throughout the cutover was consumed by the tally, none lost
    And the predecessor noticed nothing since the witness's note
