package console

// createDeps is what this section needs of the rest of the gateway.
type createDeps struct{}
