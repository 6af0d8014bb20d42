@conformance @shares-cluster
Feature: Conformance — design 19, per capability, per implementation
  Design 25 §10, step 3. An SDK is an implementation of a specified wire (ADR 0074), and two
  implementations that disagree about an envelope do not fail to compile: they ignore each other
  while both keep running. So every implementation is driven, through its conformance driver
  (docs/conformance.md), against the same fixtures (features/fixtures), on a real server, with the
  credentials genesis composed; and each is checked for exactly the capabilities it claims
  (conformance/registry.yaml).

  The mesh is features/testdata/conformance.yaml: emitter (node-a) emits reading and
  alarm.raised; consumer (node-b) consumes them; server (node-a) serves echo; caller (node-b)
  uses it; provider (node-a) provides a database.

  Its scenarios share clusters (@shares-cluster): a delivery published with an id of its own and
  the consumer a driver drove are put back once the scenario ends (EVENTS and DEAD purged), and the
  cluster is leased to the next scenario only if it then reads as raised, in both accounts: the
  same streams and durable consumers, configured the same, nothing pending, unacknowledged,
  redelivered or waited for, no other consumer having delivered. A scenario that emits a fixture
  (its id stays in the stream's two-minute duplicate window, which a purge keeps), breaks the
  cluster on purpose or fails gets a cluster of its own; its cluster is thrown away.

  Background:
    Given a mesh raised from nothing from "testdata/conformance.yaml"

  Scenario: Each implementation is checked for exactly what it claims
    Then the registry of implementations says:
      | implementation | language   | connection | events  | tools       | provisioning |
      | go             | go         | claimed    | claimed | claimed     | claimed      |
      | js             | javascript | claimed    | claimed | not claimed | not claimed  |
    And the scenarios of this feature check every capability an implementation claims, and none it does not

  Scenario: A module using a capability its language's SDK does not implement is refused at build time
    When the build path checks a module in "cobol" that emits "saved"
    Then the build is refused, naming the module and the language without an SDK
    When the build path checks a module in "go" that emits "saved" and serves "look"
    Then the build is accepted
    When the build path checks a module in "javascript" that emits "saved" and serves "look"
    Then the build is refused, naming the module, its language and the capability "tools" its SDK lacks
    When the build path checks a module in "javascript" that emits "saved"
    Then the build is accepted

  @connection
  Scenario Outline: The floor: every implementation reads the same credential
    When the driver of "<implementation>" connects as "emitter" on "node-a"
    Then it has taken the identity module "emitter" on node "node-a"

    Examples:
      | implementation |
      | go             |
      | js             |

  @connection
  Scenario Outline: The floor: a bus presenting another certificate is refused
    When the driver of "<implementation>" connects as "emitter" on "node-a" pinning the fingerprint of "fingerprint-mismatch.json"
    Then it is refused as "fingerprint"

    Examples:
      | implementation |
      | go             |
      | js             |

  @connection
  Scenario Outline: Identity comes from the credential, never from the environment
    When the driver of "<implementation>" connects as "emitter" on "node-a" in the environment of "environment.json"
    Then it has taken the identity module "emitter" on node "node-a"
    And the environment it reports is node "node-a" and module "emitter"
    When the driver of "<implementation>" emits "event.json" as "emitter" on "node-a" in the environment of "environment.json"
    Then the bus holds the event of "event.json", header by header and byte for byte

    Examples:
      | implementation |
      | go             |
      | js             |

  @events
  Scenario Outline: An emitted event is the fixture, header by header and byte for byte
    When the driver of "<implementation>" emits "<fixture>" as "emitter" on "node-a"
    Then the bus holds the event of "<fixture>", header by header and byte for byte

    Examples:
      | implementation | fixture             |
      | go             | event.json          |
      | go             | event-optional.json |
      | js             | event.json          |
      | js             | event-optional.json |

  @events
  Scenario Outline: A delivery reaches the handler as the fixture says; an unknown x- header is accepted
    Given the driver of "<implementation>" consumes "emitter.reading" as "consumer" on "node-b"
    When the delivery of "delivery-unknown-header.json" is published on the bus
    Then the handler received exactly the event "delivery-unknown-header.json" describes
    And nothing is pending on the consumer "node-b_consumer"

    Examples:
      | implementation |
      | go             |
      | js             |

  @events
  Scenario Outline: A delivery missing a required header is refused, naming the header
    The refusal is the server's to tell: the reader terminates the delivery with a reason naming
    what it refused, and the server's advisory carries it to the one who listens, the controller.
    Given the driver of "<implementation>" consumes "emitter.reading" as "consumer" on "node-b"
    When the delivery of "delivery-missing-header.json" is published on the bus
    Then the server advises that "node-b_consumer" terminated it, naming the header "delivery-missing-header.json" says is missing
    And no handler received it
    And nothing is pending on the consumer "node-b_consumer"

    Examples:
      | implementation |
      | go             |
      | js             |

  @events
  Scenario Outline: A delivery whose source is not its subject's module, or whose body is not JSON, is refused
    Design 19: a module's account may publish only into its own namespace, so x-source cannot
    disagree with where the message arrived from. The emitter publishes on its own subject, as
    the server lets it; every reader refuses what it claims beyond that.
    Given the driver of "<implementation>" consumes "emitter.reading" as "consumer" on "node-b"
    When the delivery of "<fixture>" is published on the bus
    Then the server advises that "node-b_consumer" terminated it, naming what "<fixture>" says is refused
    And no handler received it
    And nothing is pending on the consumer "node-b_consumer"

    Examples:
      | implementation | fixture                      |
      | go             | delivery-spoofed-source.json |
      | go             | delivery-not-json.json       |
      | js             | delivery-spoofed-source.json |
      | js             | delivery-not-json.json       |

  @events
  Scenario Outline: Delivery is at-least-once: the same event delivered twice is handled once
    Given the driver of "<implementation>" consumes "emitter.reading" as "consumer" on "node-b"
    When the delivery of "delivery-twice.json" is published on the bus as often as it says
    Then the handler received it as often as "delivery-twice.json" says
    And nothing is pending on the consumer "node-b_consumer"

    Examples:
      | implementation |
      | go             |
      | js             |

  @events
  Scenario Outline: A failing handler asks again, and after max-deliver the event is dead-lettered
    The SDK waits 1 s after an event's first failed delivery, doubling after each; here it waits
    250 ms (consume --redeliver-after), since the scenario proves the deliveries and the dead
    letter, not the outage they ride out (the next scenario's).

    Given the driver of "<implementation>" consumes "emitter.reading" as "consumer" on "node-b" with a handler that always fails, asked again first after 250 ms
    When the delivery of "delivery-unknown-header.json" is published on the bus
    Then the DEAD stream holds the max-deliveries advisory of the consumer "node-b_consumer" for that event
    And the handler received it as often as the consumer's max-deliver

    Examples:
      | implementation |
      | go             |
      | js             |

  @events @transient
  Scenario Outline: A handler failing for a moment is asked again later, and handles the event
    A handler fails because something it needs is away. Asked again at once, every delivery the
    consumer allows is spent in milliseconds and a one-second outage dead-letters the event; asked
    again after a growing delay, an outage shorter than the delays together is ridden out.
    Given the driver of "<implementation>" consumes "emitter.reading" as "consumer" on "node-b" with a handler that fails for 2 seconds
    When the delivery of "delivery-unknown-header.json" is published on the bus
    Then the consumer "node-b_consumer" acknowledges it within 30 seconds
    And the handler received it more than once
    And the DEAD stream holds no max-deliveries advisory of the consumer "node-b_consumer" for that event

    Examples:
      | implementation |
      | go             |
      | js             |

  @events @durability
  Scenario Outline: A consuming module stays whole across the bus's server killed with SIGKILL
    The module runs in its own container on the private network. Its bus is killed and started
    again on the same store; the module reconnects by itself and takes from its consumer what was
    published as the bus came back, before or after it had reconnected.
    Given the driver of "<implementation>" consumes "emitter.reading" as "consumer" on "node-b"
    When the bus's server process is killed with SIGKILL
    And the bus is started again
    And the delivery of "delivery-unknown-header.json" is published on the bus
    Then the handler received exactly the event "delivery-unknown-header.json" describes
    And nothing is pending on the consumer "node-b_consumer"

    Examples:
      | implementation |
      | go             |
      | js             |

  @events @durability
  Scenario Outline: A consuming module rides out a link that loses packets
    One packet in ten on the bus's private link is dropped, in and out: connections stall and
    retransmit, and nothing is lost or handled twice.
    Given the driver of "<implementation>" consumes "emitter.reading" as "consumer" on "node-b"
    When the bus's link on the private network loses 10% of its packets
    And the delivery of "delivery-twice.json" is published on the bus as often as it says
    Then the handler received it as often as "delivery-twice.json" says
    When the bus is healed
    Then nothing is pending on the consumer "node-b_consumer"

    Examples:
      | implementation |
      | go             |
      | js             |

  @events
  Scenario Outline: An event emitted by one implementation is consumed by another, byte for byte
    Two implementations that disagree about an envelope do not fail: they ignore each other. So
    each one's emit is read by the other's consume, the handler given exactly what the fixture
    says was emitted.
    Given the driver of "<consumer>" consumes "emitter.reading" as "consumer" on "node-b"
    When the driver of "<emitter>" emits "event.json" as "emitter" on "node-a"
    Then the handler received exactly the event "event.json" describes
    And nothing is pending on the consumer "node-b_consumer"

    Examples:
      | emitter | consumer |
      | go      | js       |
      | js      | go       |

  @tools
  Scenario Outline: A tool is served in a queue group and answers its caller
    Given the driver of "<server>" serves "echo" as "server" on "node-a"
    When the driver of "<caller>" calls "server.echo" with {"celsius":21.5} as "caller" on "node-b"
    Then the answer is {"celsius":21.5}

    Examples:
      | server | caller |
      | go     | go     |

  @tools
  Scenario Outline: A failing handler reaches the caller as an error, never a timeout
    Given the driver of "<implementation>" serves "echo" as "server" on "node-a", failing with the message of "tool-error.json"
    When the driver of "<implementation>" calls "server.echo" with {} as "caller" on "node-b"
    Then it is refused as "tool", with the message of "tool-error.json"

    Examples:
      | implementation |
      | go             |

  @tools
  Scenario Outline: A panicking handler reaches the caller as an error, and the module keeps running
    Given the driver of "<implementation>" serves "echo" as "server" on "node-a", panicking
    When the driver of "<implementation>" calls "server.echo" with {} as "caller" on "node-b"
    Then it is refused as "tool"
    And the module serving "echo" is still running

    Examples:
      | implementation |
      | go             |

  @tools
  Scenario Outline: No responders is its own answer; silence is a timeout
    Given <who serves>
    When the driver of "<implementation>" calls "server.echo" with {} as "caller" on "node-b"
    Then it is refused as "<class>"

    Examples:
      | implementation | who serves                                   | class         |
      | go             | nobody serves "server.echo"                  | no_responders |
      | go             | "server.echo" is served by one that never answers | timeout  |

  @tools @durability
  Scenario Outline: A serving module stays whole across the bus's server killed with SIGKILL
    Until the module has reconnected by itself a call is told that nobody serves the tool, a
    definite answer; once it has, it serves again, in the same process.
    Given the driver of "<implementation>" serves "echo" as "server" on "node-a"
    When the bus's server process is killed with SIGKILL
    And the bus is started again
    Then within 30 seconds the driver of "<implementation>" calls "server.echo" with {"after":"restart"} as "caller" on "node-b" and is answered {"after":"restart"}
    And the module serving "echo" is still running

    Examples:
      | implementation |
      | go             |

  @provisioning
  Scenario Outline: A grant names a consumer: a module on a machine
    When the driver of "<implementation>" reads the grant "grant.json"
    Then it yields, entry by entry, the module and node of "grant.expected.json"

    Examples:
      | implementation |
      | go             |

  @provisioning
  Scenario Outline: A provider that keeps failing a consumer says so, and status names it until it recovers
    The loop's rules (five minutes to the first word, every fifteen after) are the SDK's unit tests,
    under testing/synctest; here the words the loop would say go over a real bus to the controller,
    which keeps the newest per provider, machine and consumer (ADR 0224).
    When the driver of "<implementation>" emits "provisioner-failing.json" as "provider" on "node-a"
    Then the bus holds the event of "provisioner-failing.json", header by header and byte for byte
    And the controller's status names exactly these failing provisions:
      | provider | consumer | node   | class       | since                |
      | provider | consumer | node-b | unreachable | 2026-09-26T10:00:00Z |
    When the controller is stopped
    And the driver of "<implementation>" emits "provisioner-recovered.json" as "provider" on "node-a"
    And the controller is started
    Then the controller's status names no failing provision

    Examples:
      | implementation |
      | go             |

  @tools @adr-0039
  Scenario Outline: A module built once, first run on AMQP, serves its tools unchanged on NATS
    Given the mesh's AMQP bus is raised beside it, composed from the same description
    And the module "echo" is built once into its image
    When that image runs as "server" on "node-a" with its AMQP credential
    And the driver of "<implementation>" calls "server.echo" with {"bus":"amqp"} as "caller" on "node-b" over AMQP
    Then the answer is {"bus":"amqp"}
    When that image is stopped and runs again, unchanged, as "server" on "node-a" with its NATS credential
    And the driver of "<implementation>" calls "server.echo" with {"bus":"nats"} as "caller" on "node-b" over NATS
    Then the answer is {"bus":"nats"}
    And both runs were of the image built once

    Examples:
      | implementation |
      | go             |
