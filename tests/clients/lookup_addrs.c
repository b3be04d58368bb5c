/* For each name on the command line: getaddrinfo(name, NULL, {AF_UNSPEC, SOCK_STREAM}) and one
 * line "name addr addr ..." with the distinct addresses in the order returned (or
 * "name ERROR code"). Built with musl-gcc (dynamic and static) by tests/tests/resolver_orders.rs. */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    for (int n = 1; n < argc; n++) {
        struct addrinfo hints, *res, *p;
        char seen[64][INET6_ADDRSTRLEN];
        int count = 0;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        int rc = getaddrinfo(argv[n], NULL, &hints, &res);
        if (rc) {
            printf("%s ERROR %d\n", argv[n], rc);
            continue;
        }
        printf("%s", argv[n]);
        for (p = res; p; p = p->ai_next) {
            char buf[INET6_ADDRSTRLEN];
            const void *a = p->ai_family == AF_INET
                ? (const void *)&((struct sockaddr_in *)p->ai_addr)->sin_addr
                : (const void *)&((struct sockaddr_in6 *)p->ai_addr)->sin6_addr;
            inet_ntop(p->ai_family, a, buf, sizeof buf);
            int dup = 0;
            for (int i = 0; i < count; i++) dup |= !strcmp(seen[i], buf);
            if (dup || count == 64) continue;
            strcpy(seen[count++], buf);
            printf(" %s", buf);
        }
        printf("\n");
        freeaddrinfo(res);
    }
    return 0;
}
