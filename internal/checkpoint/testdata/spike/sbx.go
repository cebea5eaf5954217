// Spike helper of decision 0024 (not built with the module: testdata).
// sbx NAME go|node [extra bwrap args...]: starts a sandbox shaped like the local provider's, prints the init pid.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

func main() {
	name, kind, extra := os.Args[1], os.Args[2], os.Args[3:]
	d := "/tmp/cx/c/" + name
	os.RemoveAll(d)
	for _, s := range []string{"workspace", "tmp", "run"} {
		os.MkdirAll(d+"/"+s, 0o755)
	}
	var bind, argv []string
	if kind == "go" {
		bind, argv = []string{"--ro-bind", "/tmp/cx/counter", "/.helmr/agent"}, []string{"/.helmr/agent"}
	} else {
		bind, argv = []string{"--ro-bind", "/tmp/cx/counter.mjs", "/.helmr/agent.mjs"}, []string{"node", "/.helmr/agent.mjs"}
	}
	args := []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--unshare-net", "--hostname", "computer", "--cap-drop", "ALL", "--clearenv",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
		"--ro-bind", "/tmp/cx/etc", "/etc", "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf", "--ro-bind-try", "/etc/hosts", "/etc/hosts",
		"--proc", "/proc", "--remount-ro", "/proc", "--dev", "/dev", "--size", "67108864", "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
		"--bind", d + "/workspace", "/workspace", "--bind", d + "/tmp", "/tmp"}
	args = append(args, bind...)
	args = append(args, "--ro-bind", d+"/run", "/.helmr/run")
	if os.Getenv("NOREMOUNT") == "" {
		args = append(args, "--remount-ro", "/")
	}
	args = append(args, "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", "/workspace", "--chdir", "/workspace")
	args = append(args, extra...)
	tr, tw, _ := os.Pipe()
	tw.WriteString("token")
	tw.Close()
	ir, iw, _ := os.Pipe()
	ar, aw, _ := os.Pipe()
	args = append([]string{"--info-fd", "4"}, args...)
	cmd := exec.Command("bwrap", append([]string{"--args", "5", "--"}, argv...)...)
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{tr, iw, ar}
	if os.Getenv("LOGINSIDE") != "" {
		// stdout/stderr set inside: nothing of the host
	}
	logf, _ := os.OpenFile(d+"/process.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	tr.Close()
	iw.Close()
	ar.Close()
	aw.WriteString(strings.Join(args, "\x00") + "\x00")
	aw.Close()
	var info struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.NewDecoder(ir).Decode(&info); err != nil {
		panic(err)
	}
	os.WriteFile(d+"/bwrap.pid", []byte(fmt.Sprint(cmd.Process.Pid)), 0o644)
	fmt.Println(info.ChildPID)
}
