@adoption
Feature: Adoption — a mesh already running adopts the bus's server in place, and its neighbour notices nothing
  Design 25 §10, step 2. The mesh lives on the bus it has today: the controller's genesis on
  RabbitMQ, its state in PostgreSQL (the member "store"), a host on "node-a" and "node-b"
  enrolled over the broker. On the same broker, since before the mesh was raised, runs the
  predecessor's client (the member "predecessor", stand-ins/predecessor): a user and a virtual
  host of its own, which the mesh never mints or changes, one connection, a steady stream of
  sequence-numbered messages published with confirms and consumed back, and calls to its own
  responder through direct reply-to.

  When a scenario asks, the operator raises a NATS server beside the broker (the member "bus"),
  on the bus's own ports, with a configuration and JetStream data of its own: its own name, TLS
  with the certificate the mesh minted for the bus's names, an account and a user of its own.
  `mesh-controller adopt` then puts it into seat mesh-broker, in place
  (docs/decisions/0012-adoption.md). The description declares the module "nats" claiming that
  seat, placed on no node.

  The witness says what the predecessor could have noticed, from outside it and the mesh: its
  user and its connections as the broker's management API lists them, the broker's own record
  of every connection its user opened or closed, its virtual host's exchanges, queues, bindings
  and every grant in it, and the stand-in's counts. Between a note and a later look only its
  counts may change, and they must grow: a client that stopped would notice nothing and prove
  nothing by it.

  A scenario takes the cluster a scenario before it left, while no NATS server stands beside its
  broker; one that raises the server beside (and adopts it) leaves its cluster to none after it.
  So each scenario that needs the server adopted raises and adopts it itself, and each runs alone
  or beside the others (bedrun --parallel) alike.

  @compat
  Scenario: The broker the mesh had is kept as the compatibility broker, not retirable while the predecessor is connected
    Design 25 §5: the predecessor's broker stays, a module of its own ("amqp-compat" in the
    description, naming the predecessor's user and virtual host), retirable once nobody has been
    connected for the period the operator set (retire_after: 10m). The running controller asks the
    broker's management API who is connected, every 30 s in production and every 5 s in this bed
    (`mesh-controller run --live-every=5s`: the scenario proves what is observed, not how often),
    and status shows it.

    Given a mesh raised from nothing from "testdata/mesh.yaml"
    Then within 40 seconds status shows the compatibility broker "amqp-compat" with the predecessor's connections the broker lists, and not retirable

  @adopt
  Scenario: Adopting where no NATS server answers is refused, and nothing changes
    Given a mesh raised from nothing from "testdata/mesh.yaml"
    And the witness notes what the predecessor can notice
    Then adopting a server where none answers is refused, saying "no NATS server answers at"
    And the predecessor noticed nothing since the witness's note

  @adopt
  Scenario: The server raised beside the broker is adopted in place, holding its data and the configuration it was raised with
    Given a mesh raised from nothing from "testdata/mesh.yaml"
    And the operator raises a NATS server beside the broker, with a configuration of its own and a stream "LEDGER" of 3 messages
    And I note the nats container's id, start time and server process
    And the witness notes what the predecessor can notice
    When the operator adopts it into its seat
    Then the nats container is the same container, started at the same time, running the same server process
    And the stream "LEDGER" on it still holds its 3 messages
    And its configuration keeps what it was raised with, the mesh's accounts beside its own
    And status shows seat "mesh-broker" held by the module "nats", the server adopted
    And the predecessor noticed nothing since the witness's note

  @seat
  Scenario: The seat is mesh-broker, one per mesh: a second assignment of it is refused, and nothing changes
    ADR 0079: the seat is named after the server's role, not its product, and one server holds
    it. A second adoption, and a description that assigns the seat's module to a node while the
    adopted server holds it, are refused, each naming the assignment it would duplicate.

    Given a mesh raised from nothing from "testdata/mesh.yaml"
    And the NATS server beside the broker was adopted into its seat
    And the witness notes what the predecessor can notice
    Then adopting it again is refused, saying "seat mesh-broker is held already by the server", and the seat is as it was
    And a push that assigns the module "nats" to "node-b" as well is refused, saying "seat mesh-broker is held by the server", and the adopted server's configuration has no user of that placement
    And status shows seat "mesh-broker" held by the module "nats", the server adopted
    And the predecessor noticed nothing since the witness's note

  @nothing-routes
  Scenario: Every node stays on AMQP and nothing routes to the adopted server, while the predecessor notices nothing
    A push that changes every module's version restarts each module as a process of its own, and
    the controller makes its users and grants live through the broker's management API: traffic
    of the mesh, all of it on the broker. The adopted server holds every account of the mesh, and
    no principal of the mesh dials it: every credential names the broker.

    Given a mesh raised from nothing from "testdata/mesh.yaml"
    And the NATS server beside the broker was adopted into its seat
    And I note the adopted server's message counts
    And the witness notes what the predecessor can notice
    When a push gives every module the version "2.0.0"
    Then within 30 seconds every node runs every module at "2.0.0", at the revision declared to it, as status shows
    And no principal of the mesh has ever connected to the adopted server
    And the adopted server's message counts have not grown
    And the predecessor noticed nothing since the witness's note
    And the predecessor noticed nothing since the broker was raised
