package wire

// RabbitMQ's event exchange plugin (rabbitmq_event_exchange): the broker
// publishes its internal events on ExchangeEvent in virtual host
// EventVhost, each with its type as routing key. The harness keeps the
// connection and login events as the broker's own record of every
// connection, closed and refused ones too (observe.AMQPConnectionsEver).
const (
	// ExchangeEvent is the plugin's topic exchange.
	ExchangeEvent = "amq.rabbitmq.event"
	// EventVhost is the virtual host ExchangeEvent is in.
	EventVhost = "/"

	EventConnectionCreated = "connection.created"
	EventConnectionClosed  = "connection.closed"
	EventLoginSucceeded    = "user.authentication.success"
	EventLoginFailed       = "user.authentication.failure"
)

// ConnectionEventKeys are the routing keys of the events about
// connections and logins.
func ConnectionEventKeys() []string {
	return []string{EventConnectionCreated, EventConnectionClosed, EventLoginSucceeded, EventLoginFailed}
}
