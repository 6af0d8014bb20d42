@living
Feature: Living — the mesh living on its bus
  Design 25 §10, step 4. The implementations exist from step 3, so this is where a mesh is
  first raised on NATS and run: the controller keeps its state in PostgreSQL (the member
  "store"), and each node runs its host (members "node-a" and "node-b"), which enrols with a
  token the controller issued and then lives on the bus as itself.

  The mesh is raised from features/testdata/mesh.yaml: nodes node-a and node-b. Before the
  scenarios run, the harness has the controller issue each node a token (mesh-controller
  token issue) and starts the node's host with it; every check is made from outside: the
  server's monitoring, the store itself (psql in its container), a client's connection.

  Background:
    Given a mesh raised from nothing from "testdata/mesh.yaml"

  @enrol
  Scenario: A node enrols over TLS with its token, which is good for enrolling alone, and once
    Design 25 §6: the node connects with the enrolment user, the controller spends the token,
    records the node and composes the node's own user, and the node reconnects as itself. The
    enrolment user's permissions make a leaked token useless for anything but enrolling; once
    spent, its user is gone from the server.

    Then the server shows the host of "node-a" connected as "host.node-a" over TLS
    And the store records "node-a" enrolled with the token the harness issued it
    And the host of "node-a" was connected as itself within 30 seconds of its token being issued
    Given the controller issues a token for "node-b" and its enrolment user connects with it
    Then the server refuses that enrolment user each of these:
      | op        | subject                                           |
      | subscribe | mesh.node.node-a.declare                          |
      | subscribe | mesh.node.>                                       |
      | publish   | $JS.API.STREAM.MSG.GET.NODES                      |
      | publish   | $JS.API.DIRECT.GET.NODES.mesh.node.node-a.declare |
      | publish   | $JS.API.CONSUMER.CREATE.NODES                     |
      | subscribe | mesh.mod.sensor.event.>                           |
      | subscribe | _INBOX.enrol.tok-node-c.>                         |
    And the server lets that enrolment user subscribe its own token's inbox
    When the token "node-a" enrolled with is presented again
    Then the server refuses its user's login
    And a claim with it is refused by the server before it reaches the controller
    And the store still records "node-a" enrolled once, as it first did

  @enrol
  Scenario: A host stopped or killed comes back as itself, with no token to spend
    The node's sealing key and its own credential are in the host's state: started again, it
    connects as itself at once, and the store's record of it is the one its enrolment made.

    Given the store records "node-b" enrolled with the token the harness issued it
    When the node-b is stopped
    Then the server shows no open connection of "host.node-b"
    When the node-b is started again
    Then the server shows the host of "node-b" connected as "host.node-b" over TLS
    When the node-b is killed with SIGKILL
    Then the server shows no open connection of "host.node-b"
    When the node-b is started again
    Then the server shows the host of "node-b" connected as "host.node-b" over TLS
    And the store still records "node-b" enrolled once, as it first did
