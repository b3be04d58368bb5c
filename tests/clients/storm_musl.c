/* The musl getaddrinfo storm of `cargo xtask bench`: N getaddrinfo("localhost") calls (127.0.0.1
 * and ::1 from /etc/hosts, so musl sorts each time). Built with musl-gcc. */
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    struct addrinfo hints, *res;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    for (int i = 0; i < n; i++) {
        if (getaddrinfo("localhost", NULL, &hints, &res)) return 1;
        freeaddrinfo(res);
    }
    return 0;
}
