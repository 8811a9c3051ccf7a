"""Hostile programs in the languages the code verifier compiles and runs besides Python (C, C++, Java,
JavaScript, TypeScript, Go, Rust), for tests/test_code_languages_isolation.py.

One *attack kit* per language: a single program, native to its language (libc in C, the standard library
elsewhere), that reads its attack from stdin, one argument per line, the first line naming it, so that each
language is compiled once and the very same binary (or class files, or script) runs both in the sandbox and
on the host (the leaky stand-in). The attacks, by first line:

* ``read PATH...``: reads each file; prints ``read PATH SIZE`` or ``error PATH WHY``;
* ``connect PORT HOST...``: opens a TCP connection to each host; prints ``connected HOST`` or
  ``refused HOST WHY``;
* ``spawn MAX``: starts ``/bin/sleep 30`` until the system refuses or ``MAX`` run; prints ``spawned N``,
  then kills them;
* ``alloc MIB``: allocates and touches ``MIB`` MiB, 1 MiB at a time (Java off the heap, through
  ``sun.misc.Unsafe``: the JVM's ``-Xmx`` is no limit of the sandbox's); prints ``allocated MIB``;
* ``shmem MIB`` (C, C++, Go, Rust): the same in one shared anonymous mapping;
* ``disk COUNT MIB``: writes ``COUNT`` files of ``MIB`` MiB into its working directory; prints
  ``wrote TOTAL``;
* ``listen NAME WAIT_MS``: listens on the unix socket ``NAME`` (``@name``: an abstract one) for ``WAIT_MS``;
  prints ``listening T`` (epoch milliseconds), then ``accepted MESSAGE`` or ``nobody T``;
* ``dial NAME WAIT_MS``: tries to connect to ``NAME`` until it can, for ``WAIT_MS`` at most, and sends
  ``hello``; prints ``dialed T0 T1`` or ``unreachable T0 T1``;
* ``detach MARKER``: starts ``/bin/sleep MARKER`` in a session of its own, its stdio on ``/dev/null`` (a
  daemon), and exits at once; prints ``detached``;
* ``write PATH...``: creates each file; prints ``wrote PATH`` or ``refused PATH WHY``;
* ``shmput KEY SECRET WAIT_MS`` (C): leaves ``SECRET`` in a System V shared-memory segment of ``KEY`` for
  ``WAIT_MS``, then removes it; prints ``planted T`` and ``removed T``;
* ``shmget KEY WAIT_MS`` (C): looks for that segment for ``WAIT_MS`` at most; prints ``found SECRET`` or
  ``missing T0 T1``.

Every kit prints :data:`END` last when the attack ran to its end (a kit killed or crashed never does).
"""

from __future__ import annotations

import re

END = "rk-kit-end"
LANGUAGES = ("c", "cpp", "java", "js", "ts", "go", "rust")
ABSTRACT_SOCKETS = ("c", "cpp", "js", "ts", "go")
"""Kits whose language reaches abstract unix sockets: Java's ``UnixDomainSocketAddress`` refuses a NUL in
the name, and Rust's standard library names abstract addresses only from 1.70 (Debian's rustc is 1.63);
those two listen on a path under ``/tmp``."""
SHARED_MAPPINGS = ("c", "cpp", "go", "rust")
"""Kits that can map shared anonymous memory (``mmap(MAP_SHARED | MAP_ANONYMOUS)``): libc, Go's
``syscall.Mmap``, Rust declaring libc's ``mmap``. Java and node have no such call."""


C_KIT = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char *args[64];
static int nargs;

static long long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

static void touch(char *p, size_t n) {
  volatile char *v = p;
  for (size_t j = 0; j < n; j += 4096) v[j] = 1;
}

static socklen_t unix_address(struct sockaddr_un *a, const char *name) {
  size_t n = strlen(name);
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  memcpy(a->sun_path, name, n);
  if (name[0] == '@') {
    a->sun_path[0] = 0;
    return offsetof(struct sockaddr_un, sun_path) + n;
  }
  return offsetof(struct sockaddr_un, sun_path) + n + 1;
}

static void read_files(void) {
  for (int i = 1; i < nargs; i++) {
    FILE *f = fopen(args[i], "rb");
    if (!f) {
      printf("error %s %s\n", args[i], strerror(errno));
      continue;
    }
    static char buf[1 << 16];
    long total = 0;
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) total += (long)k;
    fclose(f);
    printf("read %s %ld\n", args[i], total);
  }
}

static void tcp_connect(void) {
  for (int i = 2; i < nargs; i++) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)atoi(args[1]));
    inet_pton(AF_INET, args[i], &a.sin_addr);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0)
      printf("connected %s\n", args[i]);
    else
      printf("refused %s %s\n", args[i], strerror(errno));
    if (s >= 0) close(s);
  }
}

static void spawn(void) {
  int max = atoi(args[1]), n = 0;
  static pid_t kids[4096];
  while (n < max) {
    pid_t pid = fork();
    if (pid < 0) break;
    if (pid == 0) {
      execl("/bin/sleep", "sleep", "30", (char *)0);
      _exit(127);
    }
    kids[n++] = pid;
  }
  printf("spawned %d\n", n);
  fflush(stdout);
  for (int i = 0; i < n; i++) {
    kill(kids[i], SIGKILL);
    waitpid(kids[i], 0, 0);
  }
}

static void alloc(void) {
  long mib = atol(args[1]);
  for (long i = 0; i < mib; i++) {
    char *p = malloc(1 << 20);
    if (!p) {
      printf("refused after %ld MiB\n", i);
      exit(1);
    }
    touch(p, 1 << 20);
  }
  printf("allocated %ld\n", mib);
}

static void shmem(void) {
  long mib = atol(args[1]);
  size_t n = (size_t)mib << 20;
  char *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    printf("refused %s\n", strerror(errno));
    exit(1);
  }
  touch(p, n);
  printf("allocated %ld\n", mib);
}

static void disk(void) {
  long count = atol(args[1]), mib = atol(args[2]);
  static char buf[1 << 20];
  memset(buf, 'x', sizeof buf);
  for (long i = 0; i < count; i++) {
    char name[64];
    snprintf(name, sizeof name, "fill%ld.bin", i);
    FILE *f = fopen(name, "wb");
    if (!f) {
      printf("disk error %s\n", strerror(errno));
      exit(1);
    }
    for (long m = 0; m < mib; m++) {
      if (fwrite(buf, 1, sizeof buf, f) != sizeof buf) {
        printf("disk error %s\n", strerror(errno));
        exit(1);
      }
    }
    if (fclose(f) != 0) {
      printf("disk error %s\n", strerror(errno));
      exit(1);
    }
  }
  printf("wrote %ld\n", count * mib);
}

static void listen_unix(void) {
  struct sockaddr_un a;
  socklen_t len = unix_address(&a, args[1]);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  if (s < 0 || bind(s, (struct sockaddr *)&a, len) != 0 || listen(s, 4) != 0) {
    printf("cannot listen %s\n", strerror(errno));
    exit(1);
  }
  printf("listening %lld\n", now_ms());
  fflush(stdout);
  struct pollfd p = {s, POLLIN, 0};
  if (poll(&p, 1, atoi(args[2])) == 1) {
    int c = accept(s, 0, 0);
    char msg[64] = {0};
    if (c >= 0) read(c, msg, sizeof msg - 1);
    printf("accepted %s\n", msg);
  } else {
    printf("nobody %lld\n", now_ms());
  }
  if (args[1][0] != '@') unlink(args[1]);
}

static void dial_unix(void) {
  struct sockaddr_un a;
  socklen_t len = unix_address(&a, args[1]);
  long long t0 = now_ms(), end = t0 + atoi(args[2]);
  while (now_ms() < end) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s >= 0 && connect(s, (struct sockaddr *)&a, len) == 0) {
      write(s, "hello", 5);
      close(s);
      printf("dialed %lld %lld\n", t0, now_ms());
      return;
    }
    if (s >= 0) close(s);
    usleep(20000);
  }
  printf("unreachable %lld %lld\n", t0, now_ms());
}

static void detach(void) {
  int up[2];
  if (pipe(up) != 0) exit(1);
  pid_t pid = fork();
  if (pid == 0) {
    setsid();
    if (fork() == 0) {
      int null = open("/dev/null", O_RDWR);
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
      write(up[1], "u", 1);
      execl("/bin/sleep", "sleep", args[1], (char *)0);
      _exit(127);
    }
    _exit(0);
  }
  close(up[1]);
  char c;
  if (read(up[0], &c, 1) != 1) exit(1);
  waitpid(pid, 0, 0);
  printf("detached\n");
}

static void shm_put(void) {
  int id = shmget((key_t)atol(args[1]), 4096, IPC_CREAT | 0666);
  char *p = id < 0 ? (char *)-1 : shmat(id, 0, 0);
  if (p == (char *)-1) {
    printf("cannot plant %s\n", strerror(errno));
    exit(1);
  }
  strcpy(p, args[2]);
  printf("planted %lld\n", now_ms());
  fflush(stdout);
  usleep(atoi(args[3]) * 1000);
  shmdt(p);
  shmctl(id, IPC_RMID, 0);
  printf("removed %lld\n", now_ms());
}

static void shm_get(void) {
  long long t0 = now_ms(), end = t0 + atoi(args[2]);
  while (now_ms() < end) {
    int id = shmget((key_t)atol(args[1]), 0, 0);
    char *p = id < 0 ? (char *)-1 : shmat(id, 0, SHM_RDONLY);
    if (p != (char *)-1) {
      printf("found %s\n", p);
      return;
    }
    usleep(20000);
  }
  printf("missing %lld %lld\n", t0, now_ms());
}

static void write_files(void) {
  for (int i = 1; i < nargs; i++) {
    FILE *f = fopen(args[i], "w");
    if (!f) {
      printf("refused %s %s\n", args[i], strerror(errno));
      continue;
    }
    fputs("escaped\n", f);
    if (fclose(f) != 0)
      printf("refused %s %s\n", args[i], strerror(errno));
    else
      printf("wrote %s\n", args[i]);
  }
}

int main(void) {
  static char in[1 << 16];
  size_t n = fread(in, 1, sizeof in - 1, stdin);
  in[n] = 0;
  char *save = 0;
  for (char *t = strtok_r(in, "\n", &save); t && nargs < 64; t = strtok_r(0, "\n", &save)) args[nargs++] = t;
  if (nargs == 0) return 2;
  const char *mode = args[0];
  if (!strcmp(mode, "read")) read_files();
  else if (!strcmp(mode, "connect")) tcp_connect();
  else if (!strcmp(mode, "spawn")) spawn();
  else if (!strcmp(mode, "alloc")) alloc();
  else if (!strcmp(mode, "shmem")) shmem();
  else if (!strcmp(mode, "disk")) disk();
  else if (!strcmp(mode, "listen")) listen_unix();
  else if (!strcmp(mode, "dial")) dial_unix();
  else if (!strcmp(mode, "detach")) detach();
  else if (!strcmp(mode, "write")) write_files();
  else if (!strcmp(mode, "shmput")) shm_put();
  else if (!strcmp(mode, "shmget")) shm_get();
  else {
    printf("unknown attack %s\n", mode);
    return 2;
  }
  printf("%s\n", "rk-kit-end");
  return 0;
}
"""

CPP_KIT = r"""
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace std;

static vector<string> args;

static long long now_ms() {
  return chrono::duration_cast<chrono::milliseconds>(chrono::system_clock::now().time_since_epoch()).count();
}

static socklen_t unix_address(sockaddr_un &a, const string &name) {
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path, name.data(), name.size());
  if (name[0] == '@') {
    a.sun_path[0] = 0;
    return offsetof(sockaddr_un, sun_path) + name.size();
  }
  return offsetof(sockaddr_un, sun_path) + name.size() + 1;
}

static void read_files() {
  for (size_t i = 1; i < args.size(); i++) {
    ifstream f(args[i], ios::binary);
    if (!f) {
      cout << "error " << args[i] << " " << strerror(errno) << endl;
      continue;
    }
    string data((istreambuf_iterator<char>(f)), istreambuf_iterator<char>());
    cout << "read " << args[i] << " " << data.size() << endl;
  }
}

static void tcp_connect() {
  for (size_t i = 2; i < args.size(); i++) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<unsigned short>(stoi(args[1])));
    inet_pton(AF_INET, args[i].c_str(), &a.sin_addr);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s >= 0 && connect(s, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0)
      cout << "connected " << args[i] << endl;
    else
      cout << "refused " << args[i] << " " << strerror(errno) << endl;
    if (s >= 0) close(s);
  }
}

static void spawn() {
  size_t max = stoul(args[1]);
  vector<pid_t> kids;
  while (kids.size() < max) {
    pid_t pid = fork();
    if (pid < 0) break;
    if (pid == 0) {
      execl("/bin/sleep", "sleep", "30", static_cast<char *>(nullptr));
      _exit(127);
    }
    kids.push_back(pid);
  }
  cout << "spawned " << kids.size() << endl;
  for (pid_t pid : kids) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
}

static void alloc() {
  long mib = stol(args[1]);
  vector<unique_ptr<char[]>> keep;
  for (long i = 0; i < mib; i++) {
    keep.emplace_back(new char[1 << 20]);  // throws std::bad_alloc when refused
    volatile char *v = keep.back().get();
    for (size_t j = 0; j < (1 << 20); j += 4096) v[j] = 1;
  }
  cout << "allocated " << keep.size() << endl;
}

static void shmem() {
  long mib = stol(args[1]);
  size_t n = static_cast<size_t>(mib) << 20;
  void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    cout << "refused " << strerror(errno) << endl;
    exit(1);
  }
  volatile char *v = static_cast<char *>(p);
  for (size_t j = 0; j < n; j += 4096) v[j] = 1;
  cout << "allocated " << mib << endl;
}

static void disk() {
  long count = stol(args[1]), mib = stol(args[2]);
  string chunk(1 << 20, 'x');
  for (long i = 0; i < count; i++) {
    ofstream f("fill" + to_string(i) + ".bin", ios::binary);
    for (long m = 0; m < mib && f; m++) f.write(chunk.data(), static_cast<streamsize>(chunk.size()));
    f.close();
    if (!f) {
      cout << "disk error " << strerror(errno) << endl;
      exit(1);
    }
  }
  cout << "wrote " << count * mib << endl;
}

static void listen_unix() {
  sockaddr_un a;
  socklen_t len = unix_address(a, args[1]);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  if (s < 0 || bind(s, reinterpret_cast<sockaddr *>(&a), len) != 0 || listen(s, 4) != 0) {
    cout << "cannot listen " << strerror(errno) << endl;
    exit(1);
  }
  cout << "listening " << now_ms() << endl;
  pollfd p{s, POLLIN, 0};
  if (poll(&p, 1, stoi(args[2])) == 1) {
    int c = accept(s, nullptr, nullptr);
    char msg[64] = {0};
    if (c >= 0 && read(c, msg, sizeof msg - 1) < 0) msg[0] = 0;
    cout << "accepted " << msg << endl;
  } else {
    cout << "nobody " << now_ms() << endl;
  }
  if (args[1][0] != '@') unlink(args[1].c_str());
}

static void dial_unix() {
  sockaddr_un a;
  socklen_t len = unix_address(a, args[1]);
  long long t0 = now_ms(), end = t0 + stoi(args[2]);
  while (now_ms() < end) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s >= 0 && connect(s, reinterpret_cast<sockaddr *>(&a), len) == 0) {
      if (write(s, "hello", 5) != 5) cout << "short write" << endl;
      close(s);
      cout << "dialed " << t0 << " " << now_ms() << endl;
      return;
    }
    if (s >= 0) close(s);
    this_thread::sleep_for(chrono::milliseconds(20));
  }
  cout << "unreachable " << t0 << " " << now_ms() << endl;
}

static void detach() {
  int up[2];
  if (pipe(up) != 0) exit(1);
  pid_t pid = fork();
  if (pid == 0) {
    setsid();
    if (fork() == 0) {
      int null = open("/dev/null", O_RDWR);
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
      if (write(up[1], "u", 1) != 1) _exit(1);
      execl("/bin/sleep", "sleep", args[1].c_str(), static_cast<char *>(nullptr));
      _exit(127);
    }
    _exit(0);
  }
  close(up[1]);
  char c;
  if (read(up[0], &c, 1) != 1) exit(1);
  waitpid(pid, nullptr, 0);
  cout << "detached" << endl;
}

static void write_files() {
  for (size_t i = 1; i < args.size(); i++) {
    ofstream f(args[i]);
    if (f) f << "escaped\n";
    if (f) f.close();
    if (!f)
      cout << "refused " << args[i] << " " << strerror(errno) << endl;
    else
      cout << "wrote " << args[i] << endl;
  }
}

int main() {
  for (string line; getline(cin, line);)
    if (!line.empty()) args.push_back(line);
  if (args.empty()) return 2;
  const string &mode = args[0];
  if (mode == "read") read_files();
  else if (mode == "connect") tcp_connect();
  else if (mode == "spawn") spawn();
  else if (mode == "alloc") alloc();
  else if (mode == "shmem") shmem();
  else if (mode == "disk") disk();
  else if (mode == "listen") listen_unix();
  else if (mode == "dial") dial_unix();
  else if (mode == "detach") detach();
  else if (mode == "write") write_files();
  else {
    cout << "unknown attack " << mode << endl;
    return 2;
  }
  cout << "rk-kit-end" << endl;
  return 0;
}
"""

JAVA_KIT = r"""
import java.io.*;
import java.lang.reflect.Field;
import java.net.*;
import java.nio.ByteBuffer;
import java.nio.channels.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;

public class Main {
  static List<String> args = new ArrayList<>();

  static UnixDomainSocketAddress unixAddress(String name) {
    return UnixDomainSocketAddress.of(name);  // no abstract names: a NUL is refused
  }

  public static void main(String[] argv) throws Exception {
    try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in))) {
      for (String line; (line = r.readLine()) != null; ) if (!line.isEmpty()) args.add(line);
    }
    String mode = args.get(0);
    switch (mode) {
      case "read":
        for (String p : args.subList(1, args.size())) {
          try {
            System.out.println("read " + p + " " + Files.readAllBytes(Paths.get(p)).length);
          } catch (IOException e) {
            System.out.println("error " + p + " " + e);
          }
        }
        break;
      case "connect": {
        int port = Integer.parseInt(args.get(1));
        for (String h : args.subList(2, args.size())) {
          try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(h, port), 3000);
            System.out.println("connected " + h);
          } catch (IOException e) {
            System.out.println("refused " + h + " " + e.getMessage());
          }
        }
        break;
      }
      case "spawn": {
        int max = Integer.parseInt(args.get(1));
        List<Process> kids = new ArrayList<>();
        while (kids.size() < max) {
          try {
            kids.add(new ProcessBuilder("/bin/sleep", "30")
                .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                .redirectError(ProcessBuilder.Redirect.DISCARD)
                .start());
          } catch (Throwable e) {  // IOException (fork refused) or OutOfMemoryError (no thread)
            break;
          }
        }
        System.out.println("spawned " + kids.size());
        System.out.flush();
        for (Process p : kids) p.destroyForcibly();
        break;
      }
      case "alloc": {
        long mib = Long.parseLong(args.get(1));
        Field f = Class.forName("sun.misc.Unsafe").getDeclaredField("theUnsafe");
        f.setAccessible(true);
        sun.misc.Unsafe unsafe = (sun.misc.Unsafe) f.get(null);
        for (long i = 0; i < mib; i++) {
          long p = unsafe.allocateMemory(1 << 20);  // off the heap: -Xmx does not count it
          unsafe.setMemory(p, 1 << 20, (byte) 1);
        }
        System.out.println("allocated " + mib);
        break;
      }
      case "disk": {
        long count = Long.parseLong(args.get(1)), mib = Long.parseLong(args.get(2));
        byte[] chunk = new byte[1 << 20];
        Arrays.fill(chunk, (byte) 'x');
        try {
          for (long i = 0; i < count; i++) {
            try (FileOutputStream out = new FileOutputStream("fill" + i + ".bin")) {
              for (long m = 0; m < mib; m++) out.write(chunk);
            }
          }
        } catch (IOException e) {
          System.out.println("disk error " + e.getMessage());
          System.exit(1);
        }
        System.out.println("wrote " + count * mib);
        break;
      }
      case "listen": {
        ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        try {
          server.bind(unixAddress(args.get(1)));
        } catch (IOException e) {
          System.out.println("cannot listen " + e);
          System.exit(1);
        }
        server.configureBlocking(false);
        System.out.println("listening " + System.currentTimeMillis());
        System.out.flush();
        long end = System.currentTimeMillis() + Long.parseLong(args.get(2));
        SocketChannel c = null;
        while (c == null && System.currentTimeMillis() < end) {
          c = server.accept();
          if (c == null) Thread.sleep(20);
        }
        if (c != null) {
          c.configureBlocking(true);
          ByteBuffer b = ByteBuffer.allocate(64);
          c.read(b);
          System.out.println("accepted " + new String(b.array(), 0, b.position(), StandardCharsets.UTF_8));
        } else {
          System.out.println("nobody " + System.currentTimeMillis());
        }
        server.close();
        Files.deleteIfExists(Paths.get(args.get(1)));
        break;
      }
      case "dial": {
        long t0 = System.currentTimeMillis(), end = t0 + Long.parseLong(args.get(2));
        boolean dialed = false;
        while (!dialed && System.currentTimeMillis() < end) {
          try (SocketChannel c = SocketChannel.open(unixAddress(args.get(1)))) {
            c.write(ByteBuffer.wrap("hello".getBytes(StandardCharsets.UTF_8)));
            dialed = true;
          } catch (IOException e) {
            Thread.sleep(20);
          }
        }
        System.out.println((dialed ? "dialed " : "unreachable ") + t0 + " " + System.currentTimeMillis());
        break;
      }
      case "detach": {
        new ProcessBuilder("/usr/bin/setsid", "/bin/sleep", args.get(1))
            .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
            .redirectOutput(ProcessBuilder.Redirect.DISCARD)
            .redirectError(ProcessBuilder.Redirect.DISCARD)
            .start();
        System.out.println("detached");
        System.out.println("rk-kit-end");
        System.out.flush();
        System.exit(0);
      }
      case "write":
        for (String p : args.subList(1, args.size())) {
          try {
            Files.write(Paths.get(p), "escaped\n".getBytes(StandardCharsets.UTF_8));
            System.out.println("wrote " + p);
          } catch (IOException e) {
            System.out.println("refused " + p + " " + e);
          }
        }
        break;
      default:
        System.out.println("unknown attack " + mode);
        System.exit(2);
    }
    System.out.println("rk-kit-end");
    System.out.flush();
    System.exit(0);
  }
}
"""

_JS_BODY = r"""
// node's own names, untyped: tsc may have node's types (@types/node) or not, and a declaration of ours
// would clash with theirs. `require` is the CommonJS wrapper's argument: a direct eval reaches it.
const nodeRequire: any = eval('require');
const proc: any = (globalThis as any).process;
const Buf: any = (globalThis as any).Buffer;
const fs = nodeRequire('fs');
const net = nodeRequire('net');
const cp = nodeRequire('child_process');

const args: string[] = fs.readFileSync(0, 'utf8').split('\n').filter((l: string) => l.length > 0);
// console and setTimeout through globalThis: tsc's default libraries (the DOM's) declare them, es2020's do not
const log = (line: string) => (globalThis as any).console.log(line);
const later = (f: any, ms: number) => (globalThis as any).setTimeout(f, ms);
const sleep = (ms: number) => new Promise((resolve) => later(resolve, ms));
const unixPath = (name: string) => (name.startsWith('@') ? '\0' + name.slice(1) : name);

function tryConnect(options: any): Promise<any> {
  return new Promise((resolve) => {
    const s = net.connect(options);
    s.setTimeout(3000);
    s.on('connect', () => resolve(s));
    s.on('error', (e: any) => resolve(e));
    s.on('timeout', () => { s.destroy(); resolve(new Error('timeout')); });
  });
}

async function main(): Promise<void> {
  const mode = args[0];
  if (mode === 'read') {
    for (const p of args.slice(1)) {
      try {
        log(`read ${p} ${fs.readFileSync(p).length}`);
      } catch (e: any) {
        log(`error ${p} ${e.code}`);
      }
    }
  } else if (mode === 'connect') {
    for (const h of args.slice(2)) {
      const s = await tryConnect({ host: h, port: Number(args[1]) });
      if (s instanceof Error) {
        log(`refused ${h} ${(s as any).code || s.message}`);
      } else {
        s.destroy();
        log(`connected ${h}`);
      }
    }
  } else if (mode === 'spawn') {
    const max = Number(args[1]);
    const kids: any[] = [];
    while (kids.length < max) {
      let kid: any;
      try {
        kid = cp.spawn('/bin/sleep', ['30'], { stdio: 'ignore' });
      } catch (e) {
        break;
      }
      if (kid.pid === undefined) {  // refused: reported as an 'error' event
        kid.on('error', () => {});
        break;
      }
      kids.push(kid);
    }
    log(`spawned ${kids.length}`);
    for (const kid of kids) kid.kill('SIGKILL');
  } else if (mode === 'alloc') {
    const mib = Number(args[1]);
    const keep: any[] = [];
    for (let i = 0; i < mib; i++) keep.push(Buf.allocUnsafeSlow(1 << 20).fill(1));  // off V8's heap
    log(`allocated ${keep.length}`);
  } else if (mode === 'disk') {
    const count = Number(args[1]), mib = Number(args[2]);
    const chunk = Buf.alloc(1 << 20, 'x');
    try {
      for (let i = 0; i < count; i++) {
        const fd = fs.openSync(`fill${i}.bin`, 'w');
        for (let m = 0; m < mib; m++) fs.writeSync(fd, chunk);
        fs.closeSync(fd);
      }
    } catch (e: any) {
      log(`disk error ${e.code}`);
      proc.exit(1);
    }
    log(`wrote ${count * mib}`);
  } else if (mode === 'listen') {
    const got: any = await new Promise((resolve) => {
      const server = net.createServer((c: any) => c.on('data', (d: any) => resolve(`accepted ${d}`)));
      server.on('error', (e: any) => resolve(`cannot listen ${e.code}`));
      server.listen(unixPath(args[1]), () => {
        log(`listening ${Date.now()}`);
        later(() => resolve(`nobody ${Date.now()}`), Number(args[2]));
      });
    });
    log(got);
    if (got.startsWith('cannot')) proc.exit(1);
    if (!args[1].startsWith('@')) try { fs.unlinkSync(args[1]); } catch (e) {}
  } else if (mode === 'dial') {
    const t0 = Date.now(), end = t0 + Number(args[2]);
    let dialed = false;
    while (!dialed && Date.now() < end) {
      const s = await tryConnect({ path: unixPath(args[1]) });
      if (s instanceof Error) {
        await sleep(20);
      } else {
        await new Promise((resolve) => s.end('hello', resolve));
        dialed = true;
      }
    }
    log(`${dialed ? 'dialed' : 'unreachable'} ${t0} ${Date.now()}`);
  } else if (mode === 'detach') {
    const kid = cp.spawn('/bin/sleep', [args[1]], { detached: true, stdio: 'ignore' });
    kid.unref();
    log(kid.pid === undefined ? 'not started' : 'detached');
  } else if (mode === 'write') {
    for (const p of args.slice(1)) {
      try {
        fs.writeFileSync(p, 'escaped\n');
        log(`wrote ${p}`);
      } catch (e: any) {
        log(`refused ${p} ${e.code}`);
      }
    }
  } else {
    log(`unknown attack ${mode}`);
    proc.exit(2);
  }
  log('rk-kit-end');
  proc.exit(0);
}

main().catch((e: any) => { log(`crashed ${e}`); proc.exit(1); });
"""


def _strip_types(ts: str) -> str:
    """The JavaScript kit: the TypeScript one without its annotations (the few forms it uses)."""
    js = re.sub(r"\((\w+) as any\)", r"\1", ts)
    types = r"(string\[\]|string|number|any\[\]|any|Promise<void>|Promise<any>)"
    js = re.sub(r"(\w)\s*:\s*" + types + r"(?=[\s,)=;])", r"\1", js)
    js = re.sub(r"\)\s*:\s*Promise<\w+>", ")", js)
    js = js.replace("catch (e: any)", "catch (e)")
    return js


TS_KIT = _JS_BODY
JS_KIT = "'use strict';\n" + _strip_types(_JS_BODY)

GO_KIT = r"""
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func ms() int64 { return time.Now().UnixMilli() }

func touch(b []byte) {
	for j := 0; j < len(b); j += 4096 {
		b[j] = 1
	}
}

func main() {
	var args []string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if line := strings.TrimRight(sc.Text(), "\r"); line != "" {
			args = append(args, line)
		}
	}
	switch args[0] {
	case "read":
		for _, p := range args[1:] {
			if b, err := os.ReadFile(p); err != nil {
				fmt.Println("error", p, err)
			} else {
				fmt.Println("read", p, len(b))
			}
		}
	case "connect":
		for _, h := range args[2:] {
			if c, err := net.DialTimeout("tcp", net.JoinHostPort(h, args[1]), 3*time.Second); err != nil {
				fmt.Println("refused", h, err)
			} else {
				c.Close()
				fmt.Println("connected", h)
			}
		}
	case "spawn":
		max, _ := strconv.Atoi(args[1])
		var kids []*exec.Cmd
		for len(kids) < max {
			c := exec.Command("/bin/sleep", "30")
			if err := c.Start(); err != nil {
				break
			}
			kids = append(kids, c)
		}
		fmt.Println("spawned", len(kids))
		for _, c := range kids {
			c.Process.Kill()
			c.Wait()
		}
	case "alloc":
		mib, _ := strconv.Atoi(args[1])
		keep := make([][]byte, 0, mib)
		for i := 0; i < mib; i++ {
			b := make([]byte, 1<<20)
			touch(b)
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep))
	case "shmem":
		mib, _ := strconv.Atoi(args[1])
		b, err := syscall.Mmap(-1, 0, mib<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_ANON)
		if err != nil {
			fmt.Println("refused", err)
			os.Exit(1)
		}
		touch(b)
		fmt.Println("allocated", mib)
	case "disk":
		count, _ := strconv.Atoi(args[1])
		mib, _ := strconv.Atoi(args[2])
		chunk := []byte(strings.Repeat("x", 1<<20))
		for i := 0; i < count; i++ {
			f, err := os.Create(fmt.Sprintf("fill%d.bin", i))
			for m := 0; err == nil && m < mib; m++ {
				_, err = f.Write(chunk)
			}
			if err == nil {
				err = f.Close()
			}
			if err != nil {
				fmt.Println("disk error", err)
				os.Exit(1)
			}
		}
		fmt.Println("wrote", count*mib)
	case "listen":
		wait, _ := strconv.Atoi(args[2])
		l, err := net.Listen("unix", args[1]) // "@name": an abstract socket
		if err != nil {
			fmt.Println("cannot listen", err)
			os.Exit(1)
		}
		l.(*net.UnixListener).SetDeadline(time.Now().Add(time.Duration(wait) * time.Millisecond))
		fmt.Println("listening", ms())
		if c, err := l.Accept(); err != nil {
			fmt.Println("nobody", ms())
		} else {
			buf := make([]byte, 64)
			n, _ := c.Read(buf)
			fmt.Println("accepted", string(buf[:n]))
		}
		l.Close()
	case "dial":
		wait, _ := strconv.Atoi(args[2])
		t0 := ms()
		dialed := false
		for !dialed && ms() < t0+int64(wait) {
			if c, err := net.Dial("unix", args[1]); err != nil {
				time.Sleep(20 * time.Millisecond)
			} else {
				c.Write([]byte("hello"))
				c.Close()
				dialed = true
			}
		}
		word := "unreachable"
		if dialed {
			word = "dialed"
		}
		fmt.Println(word, t0, ms())
	case "detach":
		c := exec.Command("/bin/sleep", args[1])
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			fmt.Println("not started", err)
			os.Exit(1)
		}
		fmt.Println("detached")
	case "write":
		for _, p := range args[1:] {
			if err := os.WriteFile(p, []byte("escaped\n"), 0o644); err != nil {
				fmt.Println("refused", p, err)
			} else {
				fmt.Println("wrote", p)
			}
		}
	default:
		fmt.Println("unknown attack", args[0])
		os.Exit(2)
	}
	fmt.Println("rk-kit-end")
}
"""

RUST_KIT = r"""
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

extern "C" {
    fn setsid() -> i32;
    fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, offset: i64) -> *mut u8;
}

fn ms() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()
}

fn touch(p: *mut u8, n: usize) {
    for j in (0..n).step_by(4096) {
        unsafe { std::ptr::write_volatile(p.add(j), 1) };
    }
}

fn main() {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).unwrap();
    let args: Vec<&str> = input.lines().filter(|l| !l.is_empty()).collect();
    match args[0] {
        "read" => {
            for p in &args[1..] {
                match fs::read(p) {
                    Ok(b) => println!("read {} {}", p, b.len()),
                    Err(e) => println!("error {} {}", p, e),
                }
            }
        }
        "connect" => {
            for h in &args[2..] {
                let addr: SocketAddr = format!("{}:{}", h, args[1]).parse().unwrap();
                match TcpStream::connect_timeout(&addr, Duration::from_secs(3)) {
                    Ok(_) => println!("connected {}", h),
                    Err(e) => println!("refused {} {}", h, e),
                }
            }
        }
        "spawn" => {
            let max: usize = args[1].parse().unwrap();
            let mut kids: Vec<Child> = Vec::new();
            while kids.len() < max {
                let started = Command::new("/bin/sleep")
                    .arg("30")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn();
                match started {
                    Ok(child) => kids.push(child),
                    Err(_) => break,
                }
            }
            println!("spawned {}", kids.len());
            for mut kid in kids {
                let _ = kid.kill();
                let _ = kid.wait();
            }
        }
        "alloc" => {
            let mib: usize = args[1].parse().unwrap();
            let mut keep: Vec<Vec<u8>> = Vec::new();
            for _ in 0..mib {
                let mut block = vec![0u8; 1 << 20]; // aborts ("memory allocation failed") when refused
                touch(block.as_mut_ptr(), block.len());
                keep.push(block);
            }
            println!("allocated {}", keep.len());
        }
        "shmem" => {
            let mib: usize = args[1].parse().unwrap();
            let n = mib << 20;
            let p = unsafe { mmap(std::ptr::null_mut(), n, 0x1 | 0x2, 0x01 | 0x20, -1, 0) };
            if p as isize == -1 {
                println!("refused {}", std::io::Error::last_os_error());
                std::process::exit(1);
            }
            touch(p, n);
            println!("allocated {}", mib);
        }
        "disk" => {
            let count: usize = args[1].parse().unwrap();
            let mib: usize = args[2].parse().unwrap();
            let chunk = vec![b'x'; 1 << 20];
            for i in 0..count {
                let written = fs::File::create(format!("fill{}.bin", i)).and_then(|mut f| {
                    for _ in 0..mib {
                        f.write_all(&chunk)?;
                    }
                    f.sync_all()
                });
                if let Err(e) = written {
                    println!("disk error {}", e);
                    std::process::exit(1);
                }
            }
            println!("wrote {}", count * mib);
        }
        "listen" => {
            let wait = Duration::from_millis(args[2].parse().unwrap());
            let listener = match UnixListener::bind(args[1]) {
                Ok(l) => l,
                Err(e) => {
                    println!("cannot listen {}", e);
                    std::process::exit(1);
                }
            };
            listener.set_nonblocking(true).unwrap();
            println!("listening {}", ms());
            let start = Instant::now();
            let mut said = format!("nobody {}", ms());
            while start.elapsed() < wait {
                match listener.accept() {
                    Ok((mut c, _)) => {
                        c.set_nonblocking(false).unwrap();
                        let mut msg = String::new();
                        let _ = c.read_to_string(&mut msg);
                        said = format!("accepted {}", msg);
                        break;
                    }
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(20));
                        said = format!("nobody {}", ms());
                    }
                }
            }
            println!("{}", said);
            let _ = fs::remove_file(args[1]);
        }
        "dial" => {
            let wait = Duration::from_millis(args[2].parse().unwrap());
            let (t0, start) = (ms(), Instant::now());
            let mut dialed = false;
            while !dialed && start.elapsed() < wait {
                match UnixStream::connect(args[1]) {
                    Ok(mut c) => {
                        let _ = c.write_all(b"hello");
                        dialed = true;
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
            println!("{} {} {}", if dialed { "dialed" } else { "unreachable" }, t0, ms());
        }
        "detach" => {
            let mut daemon = Command::new("/bin/sleep");
            daemon.arg(args[1]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
            unsafe {
                daemon.pre_exec(|| {
                    setsid();
                    Ok(())
                });
            }
            match daemon.spawn() {
                Ok(_) => println!("detached"),
                Err(e) => {
                    println!("not started {}", e);
                    std::process::exit(1);
                }
            }
        }
        "write" => {
            for p in &args[1..] {
                match fs::write(p, b"escaped\n") {
                    Ok(()) => println!("wrote {}", p),
                    Err(e) => println!("refused {} {}", p, e),
                }
            }
        }
        other => {
            println!("unknown attack {}", other);
            std::process::exit(2);
        }
    }
    println!("rk-kit-end");
}
"""

KITS = {
    "c": C_KIT,
    "cpp": CPP_KIT,
    "java": JAVA_KIT,
    "js": JS_KIT,
    "ts": TS_KIT,
    "go": GO_KIT,
    "rust": RUST_KIT,
}
"""The attack kit of each language, by the code verifier's language name."""

# ----------------------------------------------------------------------------------------------------------
# Compile-time attacks (the compiler runs in the sandbox too)
# ----------------------------------------------------------------------------------------------------------


def cpp_include(path: str) -> str:
    """C++ that includes ``path`` (a text file, not C++): the compiler's error quotes its lines."""
    return f'#include <cstdio>\n#include "{path}"\nint main() {{ return 0; }}\n'


def c_incbin(path: str) -> str:
    """C (and C++) that embeds ``path`` with the assembler's ``.incbin`` and prints it: compiles and prints
    the file wherever the assembler can read it."""
    return (
        "#include <stdio.h>\n"
        '__asm__(".section .rodata\\n.global rk_blob\\nrk_blob:\\n'
        f'.incbin \\"{path}\\"\\n.byte 0\\n.previous\\n");\n'
        "extern const char rk_blob[];\nint main(void) { fputs(rk_blob, stdout); return 0; }\n"
    )


def rust_include_str(path: str) -> str:
    """Rust that embeds ``path`` with ``include_str!`` and prints it."""
    return f'fn main() {{\n    print!("{{}}", include_str!("{path}"));\n}}\n'


def template_bomb(depth: int) -> str:
    """C++ whose compilation instantiates ``2**depth`` distinct class templates (each level doubles them:
    one child's argument nests the parent's type, the other's points to it): instant at depth 10, about
    4 s at 16 and 18 s at 18 on an idle core, forever at 40 (it fills any memory first). Prints
    ``2**depth`` when it compiled."""
    return (
        "#include <cstdio>\n"
        "template <class T, int N> struct Bomb {\n"
        "  static constexpr long value = Bomb<Bomb<T, N - 1>, N - 1>::value + Bomb<T *, N - 1>::value;\n"
        "};\n"
        "template <class T> struct Bomb<T, 0> { static constexpr long value = 1; };\n"
        f'int main() {{ std::printf("%ld\\n", Bomb<int, {depth}>::value); return 0; }}\n'
    )
