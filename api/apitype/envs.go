package apitype

import (
	"time"

	"github.com/gatewayhq/gateway/images"
)

// EnvStatus is what the environment routes answer.
type EnvStatus struct {
	Hash  string `json:"hash"`
	Image string `json:"image,omitempty"`
	// Digest is the image's manifest digest, when known.
	Digest string `json:"digest,omitempty"`
	// State is building, ready or failed.
	State string `json:"state"`
	// Built is false when the image already existed (nothing was built
	// for this request).
	Built bool     `json:"built"`
	Steps []string `json:"steps,omitempty"`
	Error string   `json:"error,omitempty"`
	// Versions are the image's versions of the checked packages.
	Versions map[string]string `json:"versions,omitempty"`
	// StartedAt and FinishedAt are the build's (FinishedAt zero while it
	// runs).
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Layers is what pushing the image to its registry did with its
	// layers; nil when the build pushed nothing (the image is kept in
	// the engine, or existed).
	Layers *EnvLayers `json:"layers,omitempty"`
}

// EnvLayers is what pushing an environment's image did with its layers:
// those its registry had already (reused, from an earlier build or a
// base) and those uploaded, with their sizes as people read them.
type EnvLayers struct {
	Layers       int    `json:"layers"`
	Reused       int    `json:"reused"`
	ReusedSize   string `json:"reused_size"`
	Uploaded     int    `json:"uploaded"`
	UploadedSize string `json:"uploaded_size"`
}

// EnvRequest asks for the image of an environment. Code holds the user
// code parts' zip files by name (base64 in JSON); it may be left out until
// the gateway answers code_required.
type EnvRequest struct {
	Spec images.Spec       `json:"spec"`
	Code map[string][]byte `json:"code,omitempty"`
}

// PublishedEnv is an environment an admin published under a name.
type PublishedEnv struct {
	Name        string            `json:"name"`
	Image       string            `json:"image"`
	Description string            `json:"description,omitempty"`
	Versions    map[string]string `json:"versions,omitempty"`
}

// PublishEnvRequest publishes an environment under a name: the image of a
// built environment (Env, its hash or a unique prefix of it), or an image.
type PublishEnvRequest struct {
	Env         string `json:"env,omitempty"`
	Image       string `json:"image,omitempty"`
	Description string `json:"description,omitempty"`
}
