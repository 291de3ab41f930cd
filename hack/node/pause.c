/* The sandbox process of every pod on the real node (hack/node-up.sh): it holds the pod's
 * namespaces open and reaps the zombies of a shared process namespace. It sleeps until SIGINT or
 * SIGTERM ends it. Built static, so its image is this one file (hack/node-up.sh). */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction on_stop = {.sa_handler = stop};
  struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  sigaction(SIGINT, &on_stop, NULL);
  sigaction(SIGTERM, &on_stop, NULL);
  sigaction(SIGCHLD, &on_child, NULL);
  for (;;) pause();
  return 0;
}
