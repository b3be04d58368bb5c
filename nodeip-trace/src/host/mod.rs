//! host: read-only inspection of the machine a trace runs on, apart from the tracer that acts
//! on it (`probe`). Executables and their resolvers as files: ELF images ([`elf`]), Go
//! binaries ([`go_binary`]), files mapped while a SIGBUS guard watches them ([`mapped_file`]),
//! files told apart by device, inode and change time ([`file_identity`]); the C libraries of
//! this machine and of containers ([`libc_locator`]); the kernel's BTF ([`kernel_btf`]) and its
//! netlink state ([`kernel_dump`]: interfaces, generic netlink families); processes and their
//! pods ([`process_table`], [`runtime_state`]), their small `/proc` files read in few calls
//! ([`proc_text`]); netlink sockets ([`netlink_sockets`]); the cgroup v2 root
//! ([`cgroup_root`]); and the files the explanations read (`/etc/hosts`, `gai.conf`:
//! [`resolver_config`]). One error type, [`error::HostError`]. Nothing here loads a program, attaches a probe or changes the machine.
pub mod cgroup_root;
pub mod elf;
pub mod error;
pub mod file_identity;
pub mod go_binary;
pub mod huge_pages;
pub mod kernel_btf;
pub mod kernel_dump;
pub mod libc_locator;
pub mod mapped_file;
pub mod netlink_sockets;
pub mod proc_text;
pub mod process_table;
pub mod resolver_config;
pub mod runtime_state;
