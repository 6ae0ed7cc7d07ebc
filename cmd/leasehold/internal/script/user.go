package script

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// User is the account scripts run as when it is not the worker's own: its
// uid, primary gid and supplementary groups, and what the environment
// says of it.
type User struct {
	Name   string
	Home   string
	UID    uint32
	GID    uint32
	Groups []uint32
}

// ErrNotRoot is LookupUser's answer in a process without root's rights:
// only root may run a process as another user.
var ErrNotRoot = errors.New("running scripts as another user needs a worker running as root")

// LookupUser resolves the account name, or a numeric uid, to the user that
// scripts run as. The calling process must run as root.
func LookupUser(name string) (*User, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("--user %s: %w (this one runs as uid %d)", name, ErrNotRoot, os.Geteuid())
	}
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if !errors.As(err, &unknown) {
			return nil, fmt.Errorf("--user %s: %w", name, err)
		}
		if u, err = user.LookupId(name); err != nil {
			return nil, fmt.Errorf("--user %s: no such user", name)
		}
	}
	uid, err := parseID(u.Uid)
	if err != nil {
		return nil, fmt.Errorf("--user %s: uid %q: %w", name, u.Uid, err)
	}
	gid, err := parseID(u.Gid)
	if err != nil {
		return nil, fmt.Errorf("--user %s: gid %q: %w", name, u.Gid, err)
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("--user %s: list its groups: %w", name, err)
	}
	out := &User{Name: u.Username, Home: u.HomeDir, UID: uid, GID: gid}
	for _, s := range ids {
		g, err := parseID(s)
		if err != nil {
			return nil, fmt.Errorf("--user %s: group id %q: %w", name, s, err)
		}
		out.Groups = append(out.Groups, g)
	}
	return out, nil
}

func parseID(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err
}

// arg is the user as the supervisor's argument: "UID:GID:G1,G2,...", or
// "-" for none.
func (u *User) arg() string {
	if u == nil {
		return "-"
	}
	groups := make([]string, len(u.Groups))
	for i, g := range u.Groups {
		groups[i] = strconv.FormatUint(uint64(g), 10)
	}
	return fmt.Sprintf("%d:%d:%s", u.UID, u.GID, strings.Join(groups, ","))
}

// parseCredential reads User.arg's form.
func parseCredential(s string) (*syscall.Credential, error) {
	if s == "-" {
		return nil, nil
	}
	f := strings.Split(s, ":")
	if len(f) != 3 {
		return nil, fmt.Errorf("user %q: want UID:GID:GROUPS", s)
	}
	uid, err := parseID(f[0])
	if err != nil {
		return nil, err
	}
	gid, err := parseID(f[1])
	if err != nil {
		return nil, err
	}
	// An empty list still replaces the supervisor's groups, root's among
	// them: the script gets none but its own.
	cred := &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}
	if f[2] != "" {
		for _, g := range strings.Split(f[2], ",") {
			id, err := parseID(g)
			if err != nil {
				return nil, err
			}
			cred.Groups = append(cred.Groups, id)
		}
	}
	return cred, nil
}

// env overrides the variables that name the user in environ.
func (u *User) env(environ []string) []string {
	if u == nil {
		return environ
	}
	out := environ[:0:0]
	for _, kv := range environ {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "HOME", "USER", "LOGNAME":
			continue
		}
		out = append(out, kv)
	}
	return append(out, "HOME="+u.Home, "USER="+u.Name, "LOGNAME="+u.Name)
}
