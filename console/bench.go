package console

// benchDeps is what this section needs of the rest of the gateway.
type benchDeps struct{}
