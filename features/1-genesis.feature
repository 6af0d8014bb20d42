@genesis
Feature: Genesis — a mesh raised from nothing, the server standing on it
  Design 25 §10, step 1. The mesh does not yet live on this bus: nothing speaks it
  until step 3's implementations exist. So what this bed proves is the server, its
  configuration and the permissions — each of which the server itself enforces, and
  a plain client can therefore check from outside.

  The mesh is raised from features/testdata/mesh.yaml: nodes node-a and node-b;
  sensor (emits reading and alarm.raised, serves calibrate) and mesh-catalog (seat
  mesh-catalog, serves catalog_tools) on node-a; logger (consumes sensor.reading and
  sensor.alarm.>, uses mesh-catalog.catalog_tools) on node-b; persons alice and bob;
  one enrolment token; the builder, and the source repository "modules" it builds from.

  The scenarios tagged @shares-cluster store only events with ids of their own in EVENTS and
  take only from their own consumer: at their end EVENTS is purged and the cluster is handed on if
  it then reads as raised (docs/decisions/0014-fast-beds.md), or thrown away.

  Background:
    Given a mesh raised from nothing from "testdata/mesh.yaml"

  Scenario: The streams exist with the retention of design 25 §3, and a second start changes nothing
    The control plane's streams are in an account of their own (docs/decisions/0001-accounts.md),
    and every stream is bounded: a full one refuses what is new rather than drop what it holds,
    but for DEAD, whose oldest records go first, and ARTIFACTS, whose oldest artifacts give way to
    new builds (docs/decisions/0006-builds-and-installation.md). A subject of CONTROL holds 256
    messages at most and then refuses the next, so that one publisher flooding its own subject
    cannot fill the stream for the others (docs/controller-store.md, "The ledger").

    Then the server has exactly these streams:
      | account | stream    | retention | subjects                                                                                                        | max per subject | when full                    |
      | CONTROL | CONTROL   | workqueue | mesh.control.*.report, mesh.control.enrol, mesh.control.built, mesh.control.push, mesh.control.source.*.changed | 256             | refuses new, per subject too |
      | CONTROL | NODES     | limits    | mesh.node.>                                                                                                     | 1               | refuses new                  |
      | CONTROL | BUILDS    | workqueue | mesh.build.>                                                                                                    | unlimited       | refuses new                  |
      | CONTROL | ARTIFACTS | limits    | mesh.artifact.>                                                                                                 | 1               | drops oldest                 |
      | MESH    | EVENTS    | limits    | mesh.mod.*.event.>, mesh.seat.*.event.>                                                                         | unlimited       | refuses new                  |
      | MESH    | DEAD      | limits    | $JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.EVENTS.*                                                             | unlimited       | drops oldest                 |
    And the server has exactly these durable pull consumers:
      | stream  | consumer      | filters                                                                      |
      | CONTROL | controller    |                                                                              |
      | BUILDS  | builder       |                                                                              |
      | EVENTS  | node-b_logger | mesh.mod.sensor.event.reading, mesh.mod.sensor.event.alarm.>                 |
      | EVENTS  | controller    | mesh.mod.*.event.provisioner.failing, mesh.mod.*.event.provisioner.recovered |
    When I read every stream and consumer the server has
    And the controller is stopped and started again
    Then every stream and consumer is as it was: same configuration, same creation time, none added or removed

  Scenario: The server accepts exactly the users composed from the manifests
    Then each of these users connects with the credential genesis wrote for it:
      | user                    |
      | controller              |
      | controller.mesh         |
      | host.node-a             |
      | host.node-b             |
      | mod.node-a.sensor       |
      | mod.node-a.mesh-catalog |
      | mod.node-b.logger       |
      | person.alice            |
      | person.bob              |
      | enrol.tok-node-c        |
      | builder                 |
      | source.modules          |
    And a user absent from the manifests is refused by the server
    And a composed user presenting another's password is refused by the server
    And for every user, the server refuses exactly what its composed grants do not allow, over every subject of the mesh

  @shares-cluster
  Scenario Outline: A module cannot publish outside its emits
    Given the module "<module>" on "<node>" is connected with its own credential
    When it publishes on "<subject>"
    Then the server <verdict> the publish

    Examples:
      | module | node   | subject                       | verdict |
      | sensor | node-a | mesh.mod.sensor.event.reading | accepts |
      | sensor | node-a | mesh.mod.sensor.event.forged  | refuses |
      | sensor | node-a | mesh.mod.logger.event.reading | refuses |
      | sensor | node-a | mesh.control.node-a.report    | refuses |
      | logger | node-b | mesh.mod.sensor.event.reading | refuses |
      | logger | node-b | mesh.node.node-b.declare      | refuses |

  Scenario Outline: A module cannot subscribe outside its inbox and its tools
    What a module consumes reaches it through the consumer the controller made for it. A core
    subscription on those events would hear each publish with its reply subject, which a module
    serving a tool could answer with a forged PubAck; so there is none.

    Given the module "<module>" on "<node>" is connected with its own credential
    When it subscribes to "<subject>"
    Then the server <verdict> the subscription

    Examples:
      | module | node   | subject                              | verdict |
      | logger | node-b | mesh.mod.sensor.event.reading        | refuses |
      | logger | node-b | mesh.mod.sensor.event.alarm.>        | refuses |
      | logger | node-b | mesh.mod.sensor.event.>              | refuses |
      | logger | node-b | mesh.mod.mesh-catalog.event.anything | refuses |
      | logger | node-b | mesh.node.node-b.declare             | refuses |
      | sensor | node-a | mesh.mod.sensor.tool.calibrate       | accepts |
      | sensor | node-a | mesh.mod.sensor.event.reading        | refuses |
      | sensor | node-a | mesh.>                               | refuses |

  @shares-cluster
  Scenario: A module cannot acknowledge another module's delivery
    Given the module "sensor" on "node-a" has emitted the event "reading"
    And the module "logger" on "node-b" has fetched it from its consumer without acknowledging it
    When the module "sensor" on "node-a" acknowledges that delivery
    Then the server refuses the publish
    And the delivery is still pending on the consumer "node-b_logger"
    When the module "logger" on "node-b" acknowledges that delivery
    Then nothing is pending on the consumer "node-b_logger"

  Scenario: A principal cannot subscribe another's inbox prefix
    Given the module "logger" on "node-b" is connected with its own credential
    When it subscribes to its own inbox prefix
    Then the server accepts the subscription
    When it subscribes to the inbox prefix of the module "sensor" on "node-a"
    Then the server refuses the subscription
    When it subscribes to "_INBOX.>"
    Then the server refuses the subscription
    When it subscribes to the inbox prefix of the person "alice"
    Then the server refuses the subscription

  Scenario: The monitoring port answers on the private network only
    When a probe on the private network asks "http://nats:8222/healthz"
    Then it is answered with status 200
    When a probe on the outside network asks "http://nats-outside:8222/healthz"
    Then its connection is refused
    When a probe on the outside network connects to "nats-outside:4222"
    Then it connects

  Scenario: A change to the composed configuration alone is live within one poll interval, without a restart
    Given I note the nats container's id, start time and server process
    And the person "alice" is connected with her own credential
    When the controller applies "testdata/mesh-changed.yaml", which issues the person "carol" and revokes "alice"
    Then the person "carol" connects within one watcher-poll interval of the configuration being written
    And the person "alice" is refused by the server
    And the open connection of "alice" has been closed by the server
    And the nats container is the same container, started at the same time, running the same server process
    And the server reloaded its configuration without restarting

  @reply-injection
  Scenario: No principal outside the control plane can aim a reply at it, by any route
    nats-server checks a publisher's right to a subject but never to the reply subject it names:
    a responder's answer (allow_responses), the JetStream API's statuses and a stream's PubAck all
    go wherever the sender's reply says. So the control plane's streams are in an account whose
    only users are the controller and the builder (docs/decisions/0001-accounts.md, 0007): a host,
    a source repository and an enrolment token are users of accounts of their own kind, reaching
    it through service imports, through which the server gives every request a reply of its own;
    and every responder the mesh runs answers only a caller's inbox. The subjects aimed at are a
    subject of every stream of the control account, ARTIFACTS among them. The controller, CONTROL's
    consumer, is paused while the streams are compared, so that what it takes does not hide what
    came in; resumed, it settles every request it cannot read.

    Given the driver of "go" serves "calibrate" as "sensor" on "node-a"
    And the controller is paused
    And I note what the control plane's streams hold
    When the person "alice" calls "sensor.calibrate" with its reply aimed at each of the control plane's subjects
    And the module "logger" on "node-b" pulls from its consumer with its replies aimed at each of the control plane's subjects
    And the module "sensor" on "node-a" emits "reading" with its PubAck aimed at each of the control plane's subjects
    And the enrolment token "tok-node-c" asks to enrol with its PubAck aimed at each of the control plane's subjects
    And the host of "node-a" reports with its PubAck aimed at each of the control plane's subjects
    And the repository "modules" announces with its PubAck aimed at each of the control plane's subjects
    Then the control plane's streams hold what they held, but for the requests into CONTROL themselves
    And the declaration NODES holds for "node-b" is the controller's, as the node's own credential checks it
    When the controller is resumed
    Then within 10 seconds the controller has settled every message CONTROL held, and CONTROL holds none
    When the person "alice" calls "sensor.calibrate" with its reply aimed at "mesh.mod.mesh-catalog.event.provisioner.failing"
    Then the mesh's streams hold nothing on "mesh.mod.mesh-catalog.event.provisioner.failing"

  @amqp-isolation
  Scenario: On the AMQP bus no module, person, host, token, builder or source places anything in the control plane, or reads a queue not its own, by any route
    The AMQP side of decision 0001 (docs/decisions/0009-amqp-control-plane.md). RabbitMQ checks a
    publish against the exchange only: write on the default exchange reaches every queue of a
    virtual host by name, and a module that serves a tool must have it in the mesh's. So the
    control plane is a virtual host of its own, "control", whose only writers of the default
    exchange and of any exchange but mesh.control are the controller; everyone else writes
    mesh.control with exactly its own routing keys and reads exactly its own queues, and modules
    and persons have no grant in it at all. The broker is raised on demand, from what
    mesh-controller amqp minted into the state, and reached on a port published on this host with
    each principal's own credential.

    Each principal in turn: the control plane's queues are emptied, its own messages sent and
    seen counted where they belong (so a count that does not move means refused, not unobserved);
    then every queue is given one message of the controller's, every other route is tried, and the
    broker's own counts (a passive declare as the controller) must show each queue still holding
    exactly that one message: more is something placed, less something read. Three routes are the
    Go test's alone (internal/amqptest TestAMQPIsolation), being the controller's rule or the
    broker's, not a grant: a reply_to naming another queue (taken as written; the controller
    answers in the queue of the request it read), a direct reply-to token (delivered across
    virtual hosts; the control plane never uses one), and a flood (refused past its own queue's
    bound).

    Given the mesh's AMQP bus is raised beside it, composed from the same description
    When each of these principals tries every route into the control plane with its own AMQP credential:
      | principal | who                    |
      | module    | sensor on node-a       |
      | module    | mesh-catalog on node-a |
      | module    | logger on node-b       |
      | person    | alice                  |
      | person    | bob                    |
      | host      | node-a                 |
      | host      | node-b                 |
      | token     | tok-node-c             |
      | builder   | builder                |
      | source    | modules                |
    Then the broker answered each route as decision 0009 says:
      | route                                                                  | answer                          |
      | its own key on mesh.control                                            | taken                           |
      | log in to the other virtual host                                       | refused 530 NOT_ALLOWED         |
      | a control queue by name on the default exchange                        | refused 403 ACCESS_REFUSED      |
      | a control queue by name on the mesh's default exchange, serving a tool | taken, returned 312 NO_ROUTE    |
      | a control queue by name on the mesh's default exchange, serving none   | refused 403 ACCESS_REFUSED      |
      | mesh.control with a key not its own                                    | refused 403 ACCESS_REFUSED      |
      | another exchange of the control plane                                  | refused 403 ACCESS_REFUSED      |
      | another principal's user-id on its own key                             | refused 406 PRECONDITION_FAILED |
      | a queue dead-lettering into mesh.control                               | refused 403 ACCESS_REFUSED      |
      | an exchange with mesh.control as its alternate                         | refused 403 ACCESS_REFUSED      |
      | mesh.control bound to an exchange                                      | refused 403 ACCESS_REFUSED      |
      | an exchange bound to mesh.control                                      | refused 403 ACCESS_REFUSED      |
      | consume a queue not its own                                            | refused 403 ACCESS_REFUSED      |
      | get from a queue not its own                                           | refused 403 ACCESS_REFUSED      |
      | purge a queue not its own                                              | refused 403 ACCESS_REFUSED      |
      | delete a queue not its own                                             | refused 403 ACCESS_REFUSED      |
      | bind a queue not its own to mesh.control                               | refused 403 ACCESS_REFUSED      |
      | bind its own queue to mesh.control                                     | refused 403 ACCESS_REFUSED      |
    And each principal's own messages were counted by the broker in the queues they belong to
    And after the other routes every queue of the control plane held just the controller's one message, as the broker counts them

  @torn-config
  Scenario: A torn configuration file is refused: the server keeps the last good one and the bus stays closed
    Issue 7 §2. Cut right after the jetstream block, the file has no accounts and so no users:
    nats-server's own parser accepts it, and loaded it would admit any client. The entrypoint
    applies only a whole configuration with the mesh's users in it, and keeps the last good one.

    Given I note the nats container's id, start time and server process
    When the nats container's configuration file is overwritten in place with its composed content cut right after the "jetstream" block
    Then the server keeps the configuration it had loaded, same load time and digest, for two watcher-poll intervals
    And a client without a user is refused by the server
    And every composed user still connects with its own credential
    When the whole composed configuration is written back in place
    Then the server keeps the configuration it had loaded, same load time and digest, for two watcher-poll intervals
    And a client without a user is refused by the server
    And every composed user still connects with its own credential
    And the nats container is the same container, started at the same time, running the same server process
    When the whole composed configuration is written in place with one harmless setting added
    Then the server loads a new configuration within two watcher-poll intervals
    And every composed user still connects with its own credential

  @durability
  Scenario: What JetStream acknowledged survives nats-server killed with SIGKILL
    Jepsen's analysis of NATS 2.12.1 lost acknowledged writes under the default lazy fsync; the
    server here syncs every write. The server process itself is killed, not the container: the
    entrypoint then exits like its child, and the bus is started again on the same store. This
    bed's controller asserts the modules' consumers with an AckWait of 5 s
    (`mesh-controller run --events-ack-wait=5s`; production's is 30 s): the scenario proves that
    the deliveries left unacknowledged come again, not how long they wait.

    Given the module "sensor" on "node-a" has emitted 200 events "reading", each acknowledged by JetStream
    And the module "logger" on "node-b" has fetched 200 of them from its consumer without acknowledging them
    When the bus's server process is killed with SIGKILL
    And the bus is started again
    Then EVENTS holds every event JetStream acknowledged, once each, at contiguous sequences
    And the 200 deliveries left unacknowledged come to the module "logger" on "node-b" again

  @durability
  Scenario: The controller killed with SIGKILL comes back to the same streams and consumers
    When I read every stream and consumer the server has
    And the controller is killed with SIGKILL
    And the controller is started again
    Then every stream and consumer is as it was: same configuration, same creation time, none added or removed
