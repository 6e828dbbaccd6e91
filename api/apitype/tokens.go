package apitype

import "time"

// SessionJSON describes a browser session; never its cookie.
type SessionJSON struct {
	ID        string    `json:"id"`
	Via       string    `json:"via"` // "login" or "link"
	TokenID   string    `json:"token_id,omitempty"`
	ReadOnly  bool      `json:"read_only"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// TokenJSON describes a token; the secret itself appears only once, in the
// answer that creates it.
type TokenJSON struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	ReadOnly  bool       `json:"read_only"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
	LastUsed  *time.Time `json:"last_used_at"`
	Revoked   bool       `json:"revoked"`
	Token     string     `json:"token,omitempty"`
}

// CreateTokenRequest is the body of POST /api/v1/tokens. ExpiresIn is a
// length of time (30d, 12h, 90m); empty is 30 days.
type CreateTokenRequest struct {
	Name      string `json:"name"`
	ExpiresIn string `json:"expires_in"`
	ReadOnly  bool   `json:"read_only"`
}
