// Package apitype holds the gateway's REST API on the wire: the request
// and response bodies and the error codes that the server (package api),
// the Go client, the CLI, the environment service and the benchmark
// runner share. It imports nothing of the server: besides the standard
// library, only the value types that travel in bodies as they are
// (images.Spec, bench/schedspec.Options, quota's Limits and Size). The
// JSON is dask-gateway's where dask-gateway has the route, and must stay
// byte for byte what its Python client expects.
package apitype

// Error is the body of every error answer. "error" carries the human
// message because dask-gateway's client shows that field to its user;
// "code" is the stable, machine-readable part.
type Error struct {
	Error   string `json:"error"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes (Error.Code) that clients match on or that the server's
// mapping of domain errors gives; the status code goes with each as the
// README's API section says.
const (
	CodeInvalidRequest      = "invalid_request"      // 422: a value is wrong; the message names it
	CodeNotFound            = "not_found"            // 404
	CodeClusterNotFound     = "cluster_not_found"    // 404
	CodeEnvNotFound         = "env_not_found"        // 404
	CodeBenchRunNotFound    = "bench_run_not_found"  // 404
	CodeConflict            = "conflict"             // 409
	CodeEnvMismatch         = "env_mismatch"         // 409: the image's packages differ from the client's
	CodeCodeRequired        = "code_required"        // 409: send the environment's code along
	CodeBenchRunFinished    = "bench_run_finished"   // 409
	CodeQuotaExceeded       = "quota_exceeded"       // 403, or 429 for builds at once
	CodeForbidden           = "forbidden"            // 403: a shared cluster, without the right asked for; sharing not allowed
	CodeQuotaUnavailable    = "quota_unavailable"    // 503
	CodeUnavailable         = "unavailable"          // 503: try again
	CodeDatabaseUnavailable = "database_unavailable" // 503
	CodeNoBuilder           = "no_builder"           // 501: this gateway builds no environments
	CodeInternal            = "internal"             // 500: the gateway's log has the details
)
