package console

// accountDeps is what this section needs of the rest of the gateway.
type accountDeps struct{}
