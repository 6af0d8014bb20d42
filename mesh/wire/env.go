package wire

// Environment variables a host sets for a module's process. Only the
// credential's path is taken from the environment: node and module come
// from the credential, and an SDK overwrites these two where they
// disagree with it (design 19, "Identity"), so module code reading them
// sees the identity the mesh authorised.
const (
	// EnvNode is the node the module runs on.
	EnvNode = "MESH_NODE"
	// EnvModule is the module's name.
	EnvModule = "MESH_MODULE"
	// EnvCredential is the path of the module's credential file.
	EnvCredential = "MESH_CREDENTIAL"
)

// EnvConfig is the path of the module's configuration file, when its
// declaration gives it one (Declaration.Config): JSON the controller
// derived for it, such as the catalogue's Catalogue.
const EnvConfig = "MESH_CONFIG"
