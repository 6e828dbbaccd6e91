package auth

// What the external tests (package auth_test, which may use authtest)
// read of the JupyterHub authenticator's insides.

// MaxHubAnswers bounds the hub answers kept.
const MaxHubAnswers = maxHubAnswers

// Remembered is how many hub answers are kept.
func (h *JupyterHub) Remembered() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.cache)
}
