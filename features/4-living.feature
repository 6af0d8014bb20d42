@living
Feature: Living — the mesh living on its bus
  Design 25 §10, step 4. The implementations exist from step 3, so this is where a mesh is
  first raised on NATS and run: the controller keeps its state in PostgreSQL (the member
  "store"), and each node runs its host (members "node-a" and "node-b"), which enrols with a
  token the controller issued and then lives on the bus as itself.

  The mesh is raised from features/testdata/mesh.yaml: nodes node-a and node-b. Before the
  scenarios run, the harness has the controller issue each node a token (mesh-controller
  token issue) and starts the node's host with it; every check is made from outside: the
  server's monitoring, the store itself (psql in its container), a client's connection. The
  build path (the repository "modules" and a builder) is raised only where a scenario says
  "with its build path": the others never use it.

  A flow the mesh has on both buses is an outline with a row per bus: "on nats" raises the
  mesh on the NATS server, "on amqp" on RabbitMQ alone (the controller's genesis on the broker,
  its users made live through the management API; no NATS server runs), and every check asks
  the bus the mesh is on, in its own terms. The bed's table tallies each flow per bus. A flow on
  one bus only says which, and why.

  @enrol
  Scenario Outline: A node enrols over TLS with its token and connects as itself
    Design 25 §6: the node connects with the enrolment user, the controller spends the token,
    records the node and composes the node's own user, and the node reconnects as itself.

    Given a mesh raised from nothing from "testdata/mesh.yaml" on <bus>
    Then the server shows the host of "node-a" connected as "host.node-a" over TLS
    And the store records "node-a" enrolled with the token the harness issued it
    And the host of "node-a" was connected as itself within 30 seconds of its token being issued

    Examples:
      | bus  |
      | nats |
      | amqp |

  @enrol
  Scenario Outline: A token is good for enrolling alone, and once
    The enrolment user's permissions make a leaked token useless for anything but enrolling;
    once spent, its user stays for a grace (so that no composition closes its connection before
    the answer reaches it), then is gone from the server. The grace is 30 seconds by default; the
    harness issues this bed's tokens with 10 (token issue --grace 10s), which the scenario waits
    out. On NATS only in this form: the broker's side, every route a token could take into the
    control plane, is the genesis bed's @amqp-isolation scenario.

    Given a mesh raised from nothing from "testdata/mesh.yaml" on <bus>
    And the store records "node-a" enrolled with the token the harness issued it
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
    When the token "node-a" enrolled with is presented again, once its grace after the spend is over
    Then the server refuses its user's login
    And a claim with it is refused by the server before it reaches the controller
    And the store still records "node-a" enrolled once, as it first did

    Examples:
      | bus  |
      | nats |

  @enrol
  Scenario Outline: An expired token is refused by the controller, with the reason, and status counts it
    A token's user may log in until a composition drops it; a claim made after the token's
    lifetime reaches the controller, which answers it with the reason and counts it once.

    Given a mesh raised from nothing from "testdata/mesh.yaml" on <bus>
    And the controller issues a token for "node-b" good for 3 seconds
    When that token has expired
    Then a claim with it is answered by the controller with a refusal saying "expired at"
    And status counts that token's claim refused once, saying "expired at"

    Examples:
      | bus  |
      | nats |
      | amqp |

  @enrol
  Scenario Outline: A host stopped or killed comes back as itself, with no token to spend
    The node's sealing key and its own credential are in the host's state: started again, it
    connects as itself at once, and the store's record of it is the one its enrolment made.

    Given a mesh raised from nothing from "testdata/mesh.yaml" on <bus>
    And the store records "node-b" enrolled with the token the harness issued it
    When the node-b is stopped
    Then the server shows no open connection of "host.node-b"
    When the node-b is started again
    Then the server shows the host of "node-b" connected as "host.node-b" over TLS
    When the node-b is killed with SIGKILL
    Then the server shows no open connection of "host.node-b"
    When the node-b is started again
    Then the server shows the host of "node-b" connected as "host.node-b" over TLS
    And the store still records "node-b" enrolled once, as it first did

    Examples:
      | bus  |
      | nats |
      | amqp |

  @upgrade
  Scenario Outline: An upgrade rolls out to both nodes
    A push that changes the modules' version gives each node whose modules changed its next
    revision; each host takes it from its declaration on the bus (NODES; its node.<node> queue),
    fetches its modules' credentials, and reports running the new version. Status shows the
    rollout per node.

    Given a mesh raised from nothing from "testdata/mesh.yaml" on <bus>
    And I note the revisions status shows declared
    When a push gives every module the version "2.0.0"
    Then within 30 seconds every node runs every module at "2.0.0", at the revision declared to it, as status shows
    And every node was declared its next revision, once
    And the host of each node runs each module declared to it as a process and a user of its own

    Examples:
      | bus  |
      | nats |
      | amqp |

  @isolation
  Scenario Outline: A module is not its host: it reads its own credential and nothing of the host's or a sibling's
    ADR 0047 and issue 18. The host runs each module as an OS user and group of its own, which it
    allots and keeps, in a home of its own, with an environment made for it; the host's state,
    the node's sealing key, the enrolment token and the other modules' credentials are files the
    module cannot read. The module "pry" looks for them all where a module could find them (its
    own credential's path names the host's state) and connects as whatever it found, naming each
    such connection "pry"; then it connects as itself, named "pry: tried". The server is asked,
    from outside, who connected: on NATS its record of every connection, closed ones included
    (/connz); on AMQP the broker's own events (the event exchange plugin: every connection
    opened, closed, or refused at login, by the name its client gave it), which the harness
    keeps from the moment the broker is raised, and which must account for every connection
    the broker lists open before their absence proves anything.

    Given a mesh raised from nothing from "testdata/mesh.yaml" on <bus>
    When a push adds these modules to "node-a":
      """
      - name: pry
      """
    Then within 30 seconds the module "pry" on "node-a" has connected as itself, named "pry: tried"
    And the server shows no connection named "pry", open or closed
    And the host of each node runs each module declared to it as a process and a user of its own

    Examples:
      | bus  |
      | nats |
      | amqp |

  @newest
  Scenario Outline: A node that was away gets exactly the newest declaration, and an older one published again is refused
    NODES keeps the newest declaration per node (last per subject): a host away while two pushes
    went by finds only the second. A genuine older declaration, published again by hand with the
    controller's credential, lands at a later sequence but an older revision: the host refuses it
    and reports why. The controller is paused meanwhile, or its guard would put the newest back
    before the host ever read it.
    On AMQP, NODES is node.<node>, a queue of one that keeps the newest (drop-head): the steps
    read it as the host does (taken and given back at once) with the controller's credential,
    count it by the broker's own list, and publish the kept one again on mesh.control with its
    signature; put in place of the newest, it is what the host reads and refuses. The broker
    counts CONTROL's reports in the node's report queue. The controller puts every declaration
    again on its own clock, every 5 s in this bed (run --declare-every=5s; 30 s by default), so
    the newest is back within that.

    Given a mesh raised from nothing from "testdata/mesh.yaml" on <bus>
    And I keep the declaration NODES holds for "node-b"
    When the node-b is stopped
    And a push gives every module the version "2.0.0"
    And a push gives every module the version "3.0.0"
    And the node-b is started again
    Then within 30 seconds every node runs every module at "3.0.0", at the revision declared to it, as status shows
    And NODES holds one declaration for "node-b", the one status shows declared
    When the controller is paused
    And the kept declaration is published again with the controller's credential
    Then within 15 seconds CONTROL holds a report of "node-b" more
    When the controller is resumed
    Then within 30 seconds status shows "node-b" refused the kept declaration by its revision, and runs the one declared
    And NODES holds one declaration for "node-b", the one status shows declared

    Examples:
      | bus  |
      | nats |
      | amqp |

  @store-away
  Scenario Outline: A push sent while the store is away is held, and applied once when it returns
    ADR 0083's store window: the controller cannot commit the push, so it naks it with a growing
    delay and CONTROL keeps it; nothing is dropped. Once the store is back the push applies, once:
    each node one revision on, and CONTROL settled. A message held last while the store was
    away (a report) waits out its delay first, which grows to 30 s at most: so CONTROL is
    settled within that bound, not at once.
    On AMQP a held message is an unsettled delivery of the subject's control queue, given back
    after its delay: the broker's firehose, watched from the pause on, counts each time the
    push queue hands it to the controller (the paused one's prefetch included), and the
    broker's own counts say the queue still holds it, and at the end that CONTROL's queues
    hold nothing, ready or unsettled.

    Given a mesh raised from nothing from "testdata/mesh.yaml" on <bus>
    And I note the revisions status shows declared
    And the controller is paused
    When a push gives every module the version "2.0.0", sent while the controller is paused
    And the store is stopped
    And the controller is resumed
    Then within 30 seconds the controller has been handed the push 2 times more, and CONTROL still holds it
    When the store is started again
    Then within 60 seconds every node runs every module at "2.0.0", at the revision declared to it, as status shows
    And every node was declared its next revision, once
    And within 35 seconds the controller has settled every message CONTROL held, and CONTROL holds none

    Examples:
      | bus  |
      | nats |
      | amqp |

  @dead-letter
  Scenario Outline: An event whose consumer keeps failing is dead-lettered, and status names it
    After max-deliver deliveries the server gives the event up and DEAD records it; the controller
    folds DEAD into its store, and status names the module, its consumer and the event.
    On AMQP the broker dead-letters the event from the consumer's queue after its delivery
    limit into mesh.dead, which the controller consumes into its store. The module fails each
    delivery through the SDK, which asks for the event again after 250 ms in this scenario (1 s
    by default), doubling each time.

    Given a mesh raised from nothing from "testdata/mesh.yaml" on <bus>
    When the module "logger" on "node-b" fails every delivery of "sensor.reading" until its deliveries run out
    Then within 30 seconds status names the dead letter of "logger" on "node-b" for that event

    Examples:
      | bus  |
      | nats |
      | amqp |

  @catch-up
  Scenario Outline: A node cut off catches up on its reports rather than losing them
    The host reports every few seconds; a report it cannot send waits in its outbox on disk and
    goes, in order, once the bus is in reach again. A host reports once it has applied its
    declaration, which takes the controller's answer to its credential request: so every node runs
    what was declared to it before the controller is paused, so that CONTROL still holds what
    arrived when the scenario looks.
    On AMQP the paused controller's prefetch takes the reports as they come, unsettled, where no
    reader but the broker's firehose sees them: watched from the pause on, it shows each report
    as it reached the broker, routed to the node's report queue, and the broker counts the
    queue holding at least as many.

    Given a mesh raised from nothing from "testdata/mesh.yaml" on <bus>
    And within 30 seconds every node runs every module declared to it, as status shows
    And the controller is paused
    When the node-b is cut off from the private network for 8 seconds
    Then within 30 seconds CONTROL holds at least 2 reports of "node-b" made while it was cut off
    When the controller is resumed
    Then within 20 seconds the controller has settled every message CONTROL held, and CONTROL holds none

    Examples:
      | bus  |
      | nats |
      | amqp |

  @nak-reply
  Scenario Outline: An enrolment held while the store is away still reaches the enrolling node's inbox
    Design 25 §2: a CONTROL message that expects an answer carries its reply subject in its
    payload, because the delivery's own reply is the consumer's ack address. The claim is held by
    nak-with-delay cycles while the store is away; the node waits on its token's inbox, and the
    answer reaches it there once the controller can commit.
    On AMQP the inbox is the token's durable queue (enrol.<token>); the broker's firehose,
    watched from the note on, counts each time control.enrol hands the request to the
    controller, and the broker's counts say the queue still holds it.

    Given a mesh raised from nothing from "testdata/mesh.yaml" on <bus>
    And the controller issues a token for "node-b" and its enrolment user connects with it
    And I note how often the controller has been handed CONTROL's messages
    And the store is stopped
    When that token is claimed, its answer awaited on its inbox
    Then within 30 seconds the controller has been handed the enrolment request 2 times more, and CONTROL still holds it
    When the store is started again
    Then within 90 seconds the claim is answered on its inbox with the credential of "host.node-b"

    Examples:
      | bus  |
      | nats |
      | amqp |

  @tools
  Scenario Outline: A module's tool is called from another node, and refused where no grant allows it
    Design 25 §7 and design 19's tools. A push raises relay and stranger on node-b, each under its
    host as a process of its own. Each serves "call", which calls a tool on its own account and
    says what happened; relay's manifest uses sensor.calibrate, stranger's uses nothing. The
    administrator bob asks them over the bus the mesh is on (his client on NATS, his broker
    credential through mesh.rpc on AMQP): sensor on node-a answers relay, and the server refuses
    stranger, in its own words.

    Given a mesh raised from nothing from "testdata/mesh.yaml" on <bus>
    When a push adds these modules to "node-b":
      """
      - name: relay
        tools: [call]
        uses: [sensor.calibrate]
      - name: stranger
        tools: [call]
      """
    Then within 30 seconds every node runs every module declared to it, as status shows
    When the person "bob" asks "relay.call" to call "sensor.calibrate" with {"to": 1.5} 200 times
    Then the relay's answer is "ok" after 200 calls, the last answering {"offset":1.5}
    When the person "bob" asks "stranger.call" to call "sensor.calibrate" with {"to": 1.5} 1 times
    Then the relay's answer is "denied" after 1 calls, within a second

    Examples:
      | bus  |
      | nats |
      | amqp |

  @tools
  Scenario Outline: A person's client offers and calls the tools she was issued, and is closed when revoked
    Design 25 §7. A push raises relay on node-b. alice's client lists the tools the catalogue
    offers her and calls one; relay's, which she was not issued, the server refuses her (her client
    refuses at once a tool the catalogue does not have, so the mesh must have it). A person the
    controller issues on the spot, sealed to her own key, is closed by the server when revoked.
    On NATS only: the person's client speaks NATS alone (design 25 §7) and refuses an AMQP
    credential; a person's call over AMQP is proved by @tools and @install above, through the
    broker with her credential.

    Given a mesh raised from nothing from "testdata/mesh.yaml" on <bus>
    When a push adds these modules to "node-b":
      """
      - name: relay
        tools: [call]
        uses: [sensor.calibrate]
      """
    Then within 30 seconds every node runs every module declared to it, as status shows
    When the person "alice" asks her client for the mesh's tools
    Then her client offers exactly "sensor.calibrate", described as the catalogue says
    When the person "alice" calls "sensor.calibrate" with {"to": 2.5} 200 times through her client
    Then every answer is {"offset":2.5}
    And the person "alice" calling "relay.call" through her client is refused by the server
    When the controller issues the person "carol" the tools "sensor.calibrate", sealed to her own key
    And the person "carol" calls "sensor.calibrate" with {"to": 3} 1 times through her client
    Then every answer is {"offset":3}
    When the controller revokes the person "carol"
    Then the server shows no open connection of "person.carol"
    And the person "carol" calling "sensor.calibrate" through her client is refused at login, as revoked

    Examples:
      | bus  |
      | nats |

  @builds
  Scenario Outline: A build source's change reaches the builder over the bus, and the build that follows is the one it asked for
    Design 25 §9 step 4. The repository (the stand-in "modules") commits a revision and announces
    it on CONTROL; the controller asks for the build on BUILDS, whose one consumer lets a builder
    take one build at a time; the builder fetches exactly that revision from the repository, builds
    it into an artifact (the module's program with the revision's provenance after it), stores it
    in ARTIFACTS and says so on mesh.control.built; the controller records it once. A revision the
    repository does not have is a build that failed, saying so. A builder killed mid-build has its
    request handed to the builder started again, and the build is recorded once.
    On AMQP (decision 0011) the builders share the queue builds, one active at a time; the fetch
    goes through the repository's queue and its answer through the builder's, never a reply-to;
    ARTIFACTS is the stream artifacts, which the controller alone reads, each chunk's newest copy
    the one that counts. The steps read the builds queue's own counts, the broker's firehose for
    each handing, and the stream with the controller's credential.

    Given a mesh raised from nothing from "testdata/mesh.yaml" on <bus>, with its build path
    When the repository "modules" commits revision "r2" of "sensor" with the content "calibrated against the r2 reference"
    Then within 30 seconds status shows the build of "sensor" at "r2" built
    And the artifact ARTIFACTS holds for that build is the program of "sensor" with the provenance of revision "r2" and its content
    When the repository "modules" announces revision "r9" of "sensor", which it does not have
    Then within 30 seconds status shows the build of "sensor" at "r9" failed, saying "revision r9 of sensor is not in repository modules"
    Given I note how often the builders have been handed a build
    When the repository "modules" commits revision "r3" of "sensor" with the content "calibrated against the r3 reference"
    And the builder is killed with SIGKILL while that build is in hand
    And the builder is started again
    Then within 60 seconds status shows the build of "sensor" at "r3" built
    And the builders were handed that build 2 times, and status records it once
    And the artifact ARTIFACTS holds for that build is the program of "sensor" with the provenance of revision "r3" and its content

    Examples:
      | bus  |
      | nats |
      | amqp |

  @install
  Scenario Outline: An installation completes over the bus, with the outcome the path it replaces produced
    The push declares the artifact a build produced; the node's host fetches it from ARTIFACTS (its
    grant names that artifact's chunks and no other's), checks its digest, installs it as the
    module's program, runs it as a process of its own and reports it installed. Each row notes the
    record status keeps of it, and the scenario after this one compares the two buses' records. An
    artifact whose bytes are not its digest is refused by the node that fetched it, naming both.
    On AMQP (decision 0011) the host asks the controller for the artifact, and the controller,
    having checked that the node's declaration names it, copies its chunks from the stream into
    the host's own queue; the host checks them as on NATS. bob calls the installed tool over the
    bus the mesh is on: his client on NATS, his broker credential through mesh.rpc on AMQP.

    Given a mesh raised from nothing from "testdata/mesh.yaml" on <bus>, with its build path
    When the repository "modules" commits revision "r2" of "sensor" with the content "calibrated against the r2 reference"
    Then within 30 seconds status shows the build of "sensor" at "r2" built
    When a push installs that build of "sensor" on "node-a"
    Then within 30 seconds status shows "node-a" installed that build of "sensor", and runs it
    And the installation's record on "node-a" names that build, installed, and is noted as the one the mesh on <bus> keeps
    When the person "bob" calls "sensor.calibrate" with {"to": 4} 1 times over the mesh's bus
    Then every answer is {"offset":4}
    When the chunks ARTIFACTS holds of that build are overwritten with other bytes
    And a push installs that build of "sensor" on "node-b"
    Then within 30 seconds status shows "node-b" refused that build, naming its digest and the one it fetched
    And within 30 seconds status shows "node-a" installed that build of "sensor", and runs it

    Examples:
      | bus  |
      | nats |
      | amqp |

  @install
  Scenario: The installation's record is the same on the bus it replaces as on NATS
    Design 25 §9 step 4: a converted flow is proved against the behaviour it replaced, live. Each
    row of the outline above installed the same revision, built by the same builder, and noted the
    record status keeps of it; here the two are compared field by field. The artifact is a function
    of the revision and the builder's program alone, so its digest is the same on both buses; only
    when the node reported it differs, and is left out. Run beside the rows (bedrun --parallel), it
    waits for them while they run. Without both rows in the same run there is nothing to compare,
    and this scenario fails saying which is missing.

    Then the installation's records noted on amqp and on nats in this run have the same fields and the same values, the artifact's digest included
