package devissuer

import (
	"bytes"
	"errors"
	"html/template"
	"net/http"
	"strings"

	"github.com/zitadel/oidc/v3/pkg/op"
)

// The pages are plain HTML forms (no JavaScript, no external assets), so that
// a browser, a test or an integration script can drive them with form POSTs:
//
//	POST /login   id=<auth request id>&username=<username>
//	POST /device  user_code=<XXXX-XXXX>&username=<username>   (approve)
//
// The device page offers the identities as radio buttons that start
// unchosen, with one approve button: Enter in the code's field submits
// the form, and must not approve whichever identity happens to come first
// (the browser refuses the form until one is chosen).
//	POST /device  user_code=<XXXX-XXXX>&action=deny           (deny)

const banner = "DEVELOPMENT IDENTITY PROVIDER — not for production"

var pages = template.Must(template.New("pages").Parse(`
{{define "head"}}<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} · gateway dev identity provider</title>
<style>
body{font-family:system-ui,sans-serif;margin:0;background:#f6f6f6;color:#222}
.banner{background:#b00020;color:#fff;font-weight:bold;font-size:1.4em;text-align:center;padding:.8em;letter-spacing:.03em}
main{max-width:36em;margin:2em auto;background:#fff;padding:1.5em 2em;border-radius:6px;box-shadow:0 1px 4px rgba(0,0,0,.15)}
.note{color:#555;font-size:.9em}
.error{background:#fde8e8;border:1px solid #b00020;padding:.6em 1em;border-radius:4px}
button{display:block;width:100%;margin:.5em 0;padding:.7em;font-size:1em;text-align:left;cursor:pointer}
button.deny,button.approve{text-align:center;background:#eee}
button.approve{background:#1a5fb4;color:#fff}
fieldset{border:1px solid #ccc;border-radius:4px;padding:.3em 1em}
label.user{display:block;margin:.5em 0;padding:.4em;cursor:pointer}
input[type=text]{font-size:1.4em;letter-spacing:.15em;padding:.3em;width:10em;text-transform:uppercase;font-family:monospace}
code{background:#eee;padding:0 .2em}
</style>
</head>
<body>
<div class="banner" role="banner">{{.Banner}}</div>
<main>
<h1>{{.Title}}</h1>
{{if .Error}}<p class="error" role="alert">{{.Error}}</p>{{end}}
{{end}}

{{define "foot"}}
<p class="note">No passwords: this identity provider only serves loopback development setups.</p>
</main>
</body>
</html>
{{end}}

{{define "users"}}{{range .Users}}
<button type="submit" name="username" value="{{.Username}}"><strong>{{.Username}}</strong>{{if .Name}} — {{.Name}}{{end}}{{if .Email}} &lt;{{.Email}}&gt;{{end}}{{if .Groups}}<br><small>groups: {{range $n, $g := .Groups}}{{if $n}}, {{end}}{{$g}}{{end}}</small>{{end}}</button>
{{end}}{{end}}

{{define "login"}}{{template "head" .}}
<p>Client <code>{{.ClientID}}</code> asks you to sign in{{if .Scopes}} (scopes: {{.Scopes}}){{end}}.</p>
<form method="post" action="{{.Action}}">
<input type="hidden" name="id" value="{{.RequestID}}">
{{template "users" .}}
</form>
{{template "foot" .}}{{end}}

{{define "device"}}{{template "head" .}}
{{if .ClientID}}<p>Client <code>{{.ClientID}}</code> asks for access{{if .Scopes}} (scopes: {{.Scopes}}){{end}}.</p>{{end}}
<form method="post" action="{{.Action}}">
<p><label for="user_code">Code shown by the CLI:</label><br>
<input type="text" id="user_code" name="user_code" value="{{.UserCode}}" autocomplete="off" autocapitalize="characters" spellcheck="false" placeholder="XXXX-XXXX" required></p>
<fieldset><legend>Sign in as:</legend>
{{range .Users}}<label class="user"><input type="radio" name="username" value="{{.Username}}" required> <strong>{{.Username}}</strong>{{if .Name}} — {{.Name}}{{end}}{{if .Email}} &lt;{{.Email}}&gt;{{end}}{{if .Groups}}<br><small>groups: {{range $n, $g := .Groups}}{{if $n}}, {{end}}{{$g}}{{end}}</small>{{end}}</label>
{{end}}</fieldset>
<button type="submit" class="approve">Approve as the identity chosen above</button>
<button type="submit" class="deny" name="action" value="deny" formnovalidate>Deny this request</button>
</form>
{{template "foot" .}}{{end}}

{{define "message"}}{{template "head" .}}
<p>{{.Message}}</p>
{{template "foot" .}}{{end}}
`))

type pageData struct {
	Banner    string
	Title     string
	Error     string
	Message   string
	Action    string
	ClientID  string
	Scopes    string
	RequestID string
	UserCode  string
	Users     []User
}

func (i *Issuer) render(w http.ResponseWriter, status int, name string, data pageData) {
	data.Banner = banner
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		i.log.Error("devissuer: rendering page", "page", name, "err", err)
		http.Error(w, "internal error rendering page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// No form-action: browsers apply it to the redirects that follow the
	// login POST, which end at the client's redirect URI on another origin.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (i *Issuer) badRequest(w http.ResponseWriter, title, msg string) {
	i.render(w, http.StatusBadRequest, "message", pageData{Title: title, Error: msg,
		Message: "Start again from the application (gateway login, or the gateway's sign-in page)."})
}

// ---- authorization code flow ----

// loginPage: GET /login?id=<auth request id>, where the library sends the
// browser (client.LoginURL). One button per user.
func (i *Issuer) loginPage(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	ar, err := i.store.authRequestSnapshot(id)
	if id == "" || err != nil {
		i.badRequest(w, "Unknown sign-in request", "Unknown or expired authorization request id.")
		return
	}
	i.render(w, http.StatusOK, "login", pageData{
		Title:     "Sign in",
		Action:    i.basePath + "/login",
		ClientID:  ar.clientID,
		Scopes:    strings.Join(ar.scopes, " "),
		RequestID: ar.id,
		Users:     i.Users(),
	})
}

// loginSubmit: POST /login with id and username. Marks the request done for
// that user and sends the browser to the library's callback, which issues
// the code and redirects to the client.
func (i *Issuer) loginSubmit(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		i.badRequest(w, "Bad request", "The form could not be read.")
		return
	}
	id, username := r.PostForm.Get("id"), r.PostForm.Get("username")
	if id == "" {
		i.badRequest(w, "Unknown sign-in request", "The form has no authorization request id (field \"id\").")
		return
	}
	u, ok := i.userByName(username)
	if !ok {
		i.badRequest(w, "Unknown user", "Unknown username "+quote(username)+"; pick one of the offered identities.")
		return
	}
	if err := i.store.completeAuthRequest(id, u.Subject); err != nil {
		i.badRequest(w, "Unknown sign-in request", "Unknown or expired authorization request id.")
		return
	}
	i.log.Info("devissuer: sign-in", "username", u.Username, "subject", u.Subject)
	callback := i.server.AuthCallbackURL()(op.ContextWithIssuer(r.Context(), i.cfg.Issuer), id)
	http.Redirect(w, r, callback, http.StatusSeeOther)
}

// ---- device flow ----

// devicePage: GET /device[?user_code=XXXX-XXXX] (verification_uri and
// verification_uri_complete).
func (i *Issuer) devicePage(w http.ResponseWriter, r *http.Request) {
	data := pageData{Title: "Connect a device", Action: i.basePath + "/device", Users: i.Users()}
	status := http.StatusOK
	if raw := r.URL.Query().Get("user_code"); raw != "" {
		data.UserCode = normalizeUserCode(raw)
		d, err := i.store.deviceByUserCode(data.UserCode)
		if err != nil {
			data.Error = userCodeError(err)
			status = http.StatusBadRequest
		} else {
			data.ClientID = d.clientID
			data.Scopes = strings.Join(d.scopes, " ")
		}
	}
	i.render(w, status, "device", data)
}

// deviceSubmit: POST /device with user_code and username (approve) or
// action=deny.
func (i *Issuer) deviceSubmit(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		i.badRequest(w, "Bad request", "The form could not be read.")
		return
	}
	userCode := normalizeUserCode(r.PostForm.Get("user_code"))
	retry := func(msg string) {
		i.render(w, http.StatusBadRequest, "device", pageData{
			Title: "Connect a device", Error: msg, Action: i.basePath + "/device",
			UserCode: userCode, Users: i.Users(),
		})
	}
	if userCode == "" {
		retry("Enter the code shown by the CLI (field \"user_code\").")
		return
	}
	deny := r.PostForm.Get("action") == "deny"
	var u User
	if !deny {
		var ok bool
		if r.PostForm.Get("username") == "" {
			retry("Choose the identity to sign in as, then approve.")
			return
		}
		if u, ok = i.userByName(r.PostForm.Get("username")); !ok {
			retry("Unknown username " + quote(r.PostForm.Get("username")) + "; pick one of the offered identities.")
			return
		}
	}
	if err := i.store.decideDevice(userCode, u.Subject, deny); err != nil {
		retry(userCodeError(err))
		return
	}
	if deny {
		i.log.Info("devissuer: device authorization denied")
		i.render(w, http.StatusOK, "message", pageData{Title: "Request denied",
			Message: "The device request was denied. The CLI will report that access was denied; you may close this window."})
		return
	}
	i.log.Info("devissuer: device authorization approved", "username", u.Username, "subject", u.Subject)
	i.render(w, http.StatusOK, "message", pageData{Title: "Device connected",
		Message: "Signed in as " + u.Username + ". The CLI may continue; you may close this window."})
}

func (i *Issuer) loggedOutPage(w http.ResponseWriter, _ *http.Request) {
	i.render(w, http.StatusOK, "message", pageData{Title: "Signed out",
		Message: "You are signed out of the development identity provider."})
}

func userCodeError(err error) string {
	if errors.Is(err, errUnknownUserCode) {
		return "Unknown or expired code. Check the code shown by the CLI, or start `gateway login` again."
	}
	return "This code can no longer be used: " + err.Error() + "."
}

// normalizeUserCode accepts what a person types (lower case, spaces, with or
// without the dash) and returns the XXXX-XXXX form the library issued.
func normalizeUserCode(raw string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(raw) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	code := b.String()
	if len(code) == op.UserCodeBase20.CharAmount {
		n := op.UserCodeBase20.DashInterval
		return code[:n] + "-" + code[n:]
	}
	return code
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return "\"" + s + "\""
}
