package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// SessionTTL is how long a sign-in lasts.
const SessionTTL = 12 * time.Hour

// MinPassword is the shortest Config.Password.
const MinPassword = 16

// sessionCookie holds a signed-in browser's session: its expiry, a random
// value and their MAC. It is not kept on the server, so every server that
// shares the key and the password accepts it, and signing out clears it
// from the browser (a copy taken before stays good until it expires).
const sessionCookie = "leasehold_session"

// derive returns the key for one purpose, made from the dashboard's key,
// so that a MAC made for one purpose is never good for another.
func derive(key []byte, purpose string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("leasehold dashboard " + purpose))
	return h.Sum(nil)
}

func sign(key []byte, v string) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(v))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// sessionKeyFor is the key of sessions under one password: a new password
// ends every session made under the old one.
func sessionKeyFor(key []byte, password string) []byte {
	return []byte(sign(derive(key, "session"), password))
}

// newSession returns a session cookie's value that expires at exp.
func (d *Dashboard) newSession(exp time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	v := strconv.FormatInt(exp.Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString(b[:])
	return v + "." + sign(d.sessionKey, v)
}

// signedIn reports whether the request carries a session this dashboard's
// servers made and that has not expired.
func (d *Dashboard) signedIn(r *http.Request) bool {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(c.Value, '.')
	if i < 0 || !hmac.Equal([]byte(c.Value[i+1:]), []byte(sign(d.sessionKey, c.Value[:i]))) {
		return false
	}
	exp, _, _ := strings.Cut(c.Value, ".")
	sec, err := strconv.ParseInt(exp, 10, 64)
	return err == nil && d.clk.Now().Unix() < sec
}

// public reports whether a path is served without a session: the login
// page and the assets it needs.
func public(path string) bool { return path == "/login" || strings.HasPrefix(path, "/static/") }

// toLogin answers a request that needs a session: a page is sent to the
// login page, which brings the browser back; anything else is 401.
func (d *Dashboard) toLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || strings.HasPrefix(r.URL.Path, "/api/") {
		http.Error(w, "sign in to the dashboard at /login first", http.StatusUnauthorized)
		return
	}
	http.Redirect(w, r, "/login?"+url.Values{"next": {r.URL.RequestURI()}}.Encode(), http.StatusSeeOther)
}

type loginData struct{ Next, Error string }

func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request, v *view) (string, error) {
	v.SignedIn, v.Bare = false, true
	v.Title = "Sign in"
	v.Data = loginData{Next: localPath(r.URL.Query().Get("next"), "/")}
	return "login", nil
}

// login checks the password of the login form and starts a session.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	v := &view{CSRF: d.csrfToken(w, r), Title: "Sign in", Bare: true}
	next := localPath(r.PostFormValue("next"), "/")
	if !d.checkCSRF(r) {
		v.Data = loginData{Next: next, Error: "the form's CSRF token is missing or stale: reload the page and try again"}
		d.render(w, http.StatusForbidden, "login", v)
		return
	}
	addr := d.signIns.Client(r)
	if ok, wait := d.signIns.Allow(addr); !ok {
		secs := int(math.Ceil(wait.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		v.Data = loginData{Next: next, Error: fmt.Sprintf("too many failed sign-ins from %s: try again in %d s", addr, secs)}
		d.render(w, http.StatusTooManyRequests, "login", v)
		return
	}
	// Hashes of equal length, so that the comparison's time tells nothing
	// of the password's length either.
	got, want := sha256.Sum256([]byte(r.PostFormValue("password"))), sha256.Sum256([]byte(d.cfg.Password))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		d.signIns.Failed(addr, "dashboard sign-in", errors.New("wrong password"))
		v.Data = loginData{Next: next, Error: "wrong password"}
		d.render(w, http.StatusUnauthorized, "login", v)
		return
	}
	exp := d.clk.Now().Add(SessionTTL)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: d.newSession(exp), Path: "/", Expires: exp,
		MaxAge: int(SessionTTL / time.Second), HttpOnly: true, Secure: d.cfg.SecureCookies, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the browser's session.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	if !d.checkCSRF(r) {
		v := &view{CSRF: d.csrfToken(w, r), Title: "Forbidden", Data: "the form's CSRF token is missing or stale: reload the page and try again"}
		d.render(w, http.StatusForbidden, "error", v)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: d.cfg.SecureCookies, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
