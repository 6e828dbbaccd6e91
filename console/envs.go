package console

// envDeps is what this section needs of the rest of the gateway.
type envDeps struct{}
