#!/bin/bash
# A hostile worker for tests/it/sandbox.rs. Run as a worker would be (the
# real shim, the real sandbox, a worker user), it tries every way out of its
# run it knows and writes one line per attempt to escape-report.txt in its
# working directory: `<name> blocked|escaped` for an escape, `<name>
# works|broken` for ordinary work that must still be possible. The test
# asserts each line by name.
#
# The task's text says what to do: `mode:<escape|forkbomb|disk|fsize|nofile>` and the
# places to try (`db:`, `zuliprc:`, `profile:`, `data:`, `other:`,
# `other_sock:`, `outside:`, `port:`, `uport:`, `abstract:`, `eagle_pid:`,
# `pty:`, `msgq:`, `varlib_sock:`, `home_sock:`, `opt_token:`,
# `etc_token:`, `other_zuliprc:`, `wal:`, `tool:`).

if [ $# -ge 1 ]; then prompt="$1"; else prompt="$(cat)"; fi
run="${EAGLE_RUN_ID:-?}"
py=/usr/bin/python3
word() { printf '%s\n' "$prompt" | tr ' ' '\n' | sed -n "s/^$1://p" | head -n1; }
say() { printf '%s\n' "$*"; }
mode="$(word mode)"
report="$PWD/escape-report.txt"

escape() { # name, command…: blocked when the command fails
    local name="$1"
    shift
    if "$@" >/dev/null 2>&1; then echo "$name escaped" >>"$report"; else echo "$name blocked" >>"$report"; fi
}
read_any() { # succeeds when the file gives any byte (a file covered by /dev/null gives none)
    test -n "$(head -c 64 "$1" 2>/dev/null)"
}
works() { # name, command…: works when the command succeeds
    local name="$1"
    shift
    if "$@" >/dev/null 2>&1; then echo "$name works" >>"$report"; else echo "$name broken" >>"$report"; fi
}
tcp() { $py -c 'import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()' "$@"; }
udp_echo() { # sends to host:port and succeeds only if an answer comes back
    $py -c '
import socket,sys
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.settimeout(2)
s.sendto(b"hello",(sys.argv[1],int(sys.argv[2]))); s.recvfrom(64)' "$@"
}
unix_connect() { $py -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' "$@"; }
msgq_send() { # sends to the host's System V message queue with this key
    $py -c '
import ctypes,sys
libc=ctypes.CDLL(None,use_errno=True)
q=libc.msgget(int(sys.argv[1]),0)
if q<0: sys.exit(1)
buf=ctypes.create_string_buffer(b"\x01\x00\x00\x00\x00\x00\x00\x00pwned")
sys.exit(0 if libc.msgsnd(q,buf,5,0o4000)==0 else 1)' "$@"; }
abstract_connect() { $py -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect("\0"+sys.argv[1])' "$@"; }
ptrace() { $py -c '
import ctypes,sys
libc=ctypes.CDLL(None,use_errno=True)
sys.exit(0 if libc.ptrace(16,int(sys.argv[1]),0,0)==0 else 1)' "$@"; }
loopback() { $py -c '
import socket
l=socket.socket(); l.bind(("127.0.0.1",0)); l.listen(1)
c=socket.create_connection(l.getsockname(),timeout=3); a,_=l.accept()
c.sendall(b"ping"); assert a.recv(4)==b"ping"'; }

case "$mode" in
escape)
    : >"$report"
    outside="$(word outside)"
    # Eagle's own files and other runs.
    escape read_db read_any "$(word db)"
    escape read_zuliprc read_any "$(word zuliprc)"
    escape read_profile read_any "$(word profile)"
    escape list_data ls "$(word data)"
    escape read_other_run read_any "$(word other)/home/token"
    escape list_other_run ls "$(word other)/work"
    escape connect_other_socket unix_connect "$(word other_sock)"
    # Writing outside the run.
    escape write_absolute sh -c "echo x > '$outside/escaped-absolute'"
    escape write_dotdot sh -c 'echo x > ../../escaped-dotdot'
    ln -s "$outside" planted 2>/dev/null
    escape write_symlink sh -c 'echo x > planted/escaped-symlink'
    escape write_tmp sh -c "echo x > /tmp/eagle-escaped-$run"
    escape write_eagle_home sh -c "echo x > /root/eagle-escaped-$run"
    # The checkout's git metadata.
    escape git_config_append sh -c 'echo "[core] fsmonitor = /bin/true" >> .git/config'
    escape git_config_command git config core.hooksPath /tmp
    escape git_hook sh -c 'echo "#!/bin/sh" > .git/hooks/post-commit && chmod +x .git/hooks/post-commit'
    escape git_swap mv .git .git-replaced
    escape git_attributes sh -c 'echo "* filter=evil" > .git/info/attributes'
    escape git_hooks_swap sh -c 'rm -rf .git/hooks && mkdir .git/hooks && echo "#!/bin/sh" > .git/hooks/pre-push' 
    # The network.
    escape tcp_by_ip tcp 1.1.1.1 80
    escape tcp_by_name tcp example.com 80
    escape udp_by_ip udp_echo 8.8.8.8 53
    escape tcp_eagle_listener tcp 127.0.0.1 "$(word port)"
    escape udp_eagle_listener udp_echo 127.0.0.1 "$(word uport)"
    escape tcp_postgres tcp 127.0.0.1 5432
    escape unix_postgres unix_connect /var/run/postgresql/.s.PGSQL.5432
    escape abstract_socket abstract_connect "$(word abstract)"
    escape unix_var_lib unix_connect "$(word varlib_sock)"
    escape unix_eagle_home unix_connect "$(word home_sock)"
    # The host's terminals and IPC.
    escape write_pty sh -c "echo pwned > '$(word pty)'"
    escape ipc_msgq msgq_send "$(word msgq)"
    # Secret files a profile names, wherever they are.
    escape read_token_opt read_any "$(word opt_token)"
    escape read_token_etc read_any "$(word etc_token)"
    escape read_other_zuliprc read_any "$(word other_zuliprc)"
    escape read_db_wal read_any "$(word wal)"
    # Other processes.
    escape signal_eagle kill -0 "$(word eagle_pid)"
    escape ptrace_eagle ptrace "$(word eagle_pid)"
    escape environ_eagle cat "/proc/$(word eagle_pid)/environ"
    # Ordinary work.
    works write_workdir sh -c 'echo hello > notes.txt'
    works write_tmpdir sh -c 'echo hello > "$TMPDIR/scratch"'
    works git_commit sh -c 'git add notes.txt && git -c user.name=w -c user.email=w@example.com commit -q -m notes'
    works python $py -c 'print(6 * 7)'
    works cc sh -c 'printf "int main(void){return 0;}\n" > t.c && cc t.c -o t && ./t'
    works loopback_port loopback
    works proxy_env test "$HTTPS_PROXY" = http://127.0.0.1:3128
    works read_only_tool grep -q "tool 1.0" "$(word tool)/version"
    works ask_eagle eagle request run_tests "the escape suite's own tests"
    say "[DONE: abandoned] run:$run the escape suite is done"
    ;;
forkbomb)
    # Forks without bound: the sandbox stops the whole tree at its limit.
    for _ in $(seq 1 100000); do sleep 600 & done 2>/dev/null
    say "[STATUS: forkbomb] run:$run the loop ended without being stopped"
    sleep 600
    ;;
disk)
    # Fills the disk with files each under max_file_size.
    for i in $(seq 1 64); do head -c 8388608 /dev/zero >"big-$i" 2>/dev/null; done
    say "[STATUS: disk] run:$run wrote 512 MiB without being stopped"
    sleep 600
    ;;
fsize)
    # One file past max_file_size: the kernel ends the writer (SIGXFSZ).
    head -c 33554432 /dev/zero >big 2>/dev/null
    say "[STATUS: fsize] run:$run big is $(stat -c %s big) bytes"
    exec head -c 33554432 /dev/zero >big-again
    ;;
nofile)
    # Opens files until the kernel refuses (max_open_files) and holds them:
    # the sandbox stops the tree at its limit.
    echo x >held-open
    $py -c '
import os, sys, time
fds = []
try:
    while True:
        fds.append(os.open("held-open", os.O_RDONLY))
except OSError:
    pass
time.sleep(60)
print(f"[STATUS: nofile] run:{sys.argv[1]} held {len(fds)} files for a minute without being stopped", flush=True)
' "$run"
    ;;
*)
    say "[ESCALATE: unknown_mode] run:$run no such mode: $mode"
    exit 2
    ;;
esac
