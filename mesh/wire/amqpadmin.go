package wire

// AMQPOwnerTag is the RabbitMQ user tag that marks a user as the mesh's:
// amqpdefs writes it on every user it derives, and amqpadmin changes or
// deletes no user without it. RabbitMQ gives an unknown tag no right (only
// administrator, monitoring, policymaker, management and impersonator
// mean anything to it), so the tag opens nothing; it survives a
// definitions export and import, and it stays on a user whose grants
// were cleared, which a rule by virtual host or by name would not.
const AMQPOwnerTag = "mesh"

// AMQPAdminUser is the broker's administrator the controller alone holds
// (tagged administrator, no grant in any virtual host): it changes the
// mesh's users and grants through the management API. Its password is in
// the controller's store beside the principals' secrets; no credential
// document is ever written for it.
const AMQPAdminUser = "controller.admin"

// AMQPAdministratorTag is RabbitMQ's own tag for full access to the
// management API: the controller's administrator carries it, and managing
// users needs it.
const AMQPAdministratorTag = "administrator"
