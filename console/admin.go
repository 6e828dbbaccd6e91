package console

// adminDeps is what this section needs of the rest of the gateway.
type adminDeps struct{}
