package envs

import "errors"

// Errors the service wraps; the API's mapping of domain errors gives each
// its status and error code (api/errors.go).
var (
	// ErrNotFound: no such environment, or not one of the caller's. 404.
	ErrNotFound = errors.New("environment not found")
	// ErrCodeRequired: the image must be built and the request did not
	// carry the user code's bytes; the client sends them again. 409.
	ErrCodeRequired = errors.New("the environment's code is needed to build it")
	// ErrNoBuilder: this gateway cannot build images. 501.
	ErrNoBuilder = errors.New("this gateway builds no environments")
	// ErrInvalid: a request that is not one (a publish request, or a
	// cluster's image or environment that Resolve refuses). 422.
	ErrInvalid = errors.New("invalid environment request")
	// ErrConflict: the name is taken, or the environment is not ready
	// to be published. 409.
	ErrConflict = errors.New("environment conflict")
	// ErrUnavailable: what Resolve needs (a registry, the engine) cannot
	// be reached now; the request may be tried again. 503.
	ErrUnavailable = errors.New("unavailable")
)
