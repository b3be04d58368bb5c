-- ipvs.lua: Wireshark dissector for the IPVS generic netlink family ("IPVS").
--
-- Wireshark (4.0) decodes generic netlink and learns family names from the nlctrl
-- CTRL_CMD_NEWFAMILY/GETFAMILY exchange (nodeip-trace writes a synthetic NEWFAMILY frame for
-- this), but it has no IPVS dissector: IPVS attributes show as raw data. This script registers in
-- the "genl.family" dissector table under the family name "IPVS" and decodes commands, service,
-- destination, daemon, timeout and info attributes.
--
-- Numbers come from the kernel's include/uapi/linux/ip_vs.h. Netlink is host byte order and a Lua
-- dissector cannot see the byte order Wireshark guessed, so little-endian hosts are assumed;
-- ports are network byte order (nla_put_be16), addresses are union nf_inet_addr (16 bytes).
--
-- Use:  wireshark -X lua_script:contrib/wireshark/ipvs.lua capture.pcap
--       tshark -X lua_script:contrib/wireshark/ipvs.lua -r capture.pcap -V
-- or copy it into ~/.local/lib/wireshark/plugins/.

local ipvs = Proto("ipvs_nl", "IP Virtual Server (generic netlink)")

local NLA_F_NESTED = 0x8000
local NLA_TYPE_MASK = 0x3fff
local AF_INET, AF_INET6 = 2, 10

local cmds = {
    [0] = "IPVS_CMD_UNSPEC", [1] = "IPVS_CMD_NEW_SERVICE", [2] = "IPVS_CMD_SET_SERVICE",
    [3] = "IPVS_CMD_DEL_SERVICE", [4] = "IPVS_CMD_GET_SERVICE", [5] = "IPVS_CMD_NEW_DEST",
    [6] = "IPVS_CMD_SET_DEST", [7] = "IPVS_CMD_DEL_DEST", [8] = "IPVS_CMD_GET_DEST",
    [9] = "IPVS_CMD_NEW_DAEMON", [10] = "IPVS_CMD_DEL_DAEMON", [11] = "IPVS_CMD_GET_DAEMON",
    [12] = "IPVS_CMD_SET_CONFIG", [13] = "IPVS_CMD_GET_CONFIG", [14] = "IPVS_CMD_SET_INFO",
    [15] = "IPVS_CMD_GET_INFO", [16] = "IPVS_CMD_ZERO", [17] = "IPVS_CMD_FLUSH",
}
local IPVS_CMD_SET_INFO, IPVS_CMD_GET_INFO = 14, 15

local cmd_attrs = {
    [1] = "IPVS_CMD_ATTR_SERVICE", [2] = "IPVS_CMD_ATTR_DEST", [3] = "IPVS_CMD_ATTR_DAEMON",
    [4] = "IPVS_CMD_ATTR_TIMEOUT_TCP", [5] = "IPVS_CMD_ATTR_TIMEOUT_TCP_FIN",
    [6] = "IPVS_CMD_ATTR_TIMEOUT_UDP",
}
local svc_attrs = {
    [1] = "IPVS_SVC_ATTR_AF", [2] = "IPVS_SVC_ATTR_PROTOCOL", [3] = "IPVS_SVC_ATTR_ADDR",
    [4] = "IPVS_SVC_ATTR_PORT", [5] = "IPVS_SVC_ATTR_FWMARK", [6] = "IPVS_SVC_ATTR_SCHED_NAME",
    [7] = "IPVS_SVC_ATTR_FLAGS", [8] = "IPVS_SVC_ATTR_TIMEOUT", [9] = "IPVS_SVC_ATTR_NETMASK",
    [10] = "IPVS_SVC_ATTR_STATS", [11] = "IPVS_SVC_ATTR_PE_NAME", [12] = "IPVS_SVC_ATTR_STATS64",
}
local dest_attrs = {
    [1] = "IPVS_DEST_ATTR_ADDR", [2] = "IPVS_DEST_ATTR_PORT", [3] = "IPVS_DEST_ATTR_FWD_METHOD",
    [4] = "IPVS_DEST_ATTR_WEIGHT", [5] = "IPVS_DEST_ATTR_U_THRESH", [6] = "IPVS_DEST_ATTR_L_THRESH",
    [7] = "IPVS_DEST_ATTR_ACTIVE_CONNS", [8] = "IPVS_DEST_ATTR_INACT_CONNS",
    [9] = "IPVS_DEST_ATTR_PERSIST_CONNS", [10] = "IPVS_DEST_ATTR_STATS",
    [11] = "IPVS_DEST_ATTR_ADDR_FAMILY", [12] = "IPVS_DEST_ATTR_STATS64",
    [13] = "IPVS_DEST_ATTR_TUN_TYPE", [14] = "IPVS_DEST_ATTR_TUN_PORT",
    [15] = "IPVS_DEST_ATTR_TUN_FLAGS",
}
local daemon_attrs = {
    [1] = "IPVS_DAEMON_ATTR_STATE", [2] = "IPVS_DAEMON_ATTR_MCAST_IFN",
    [3] = "IPVS_DAEMON_ATTR_SYNC_ID", [4] = "IPVS_DAEMON_ATTR_SYNC_MAXLEN",
    [5] = "IPVS_DAEMON_ATTR_MCAST_GROUP", [6] = "IPVS_DAEMON_ATTR_MCAST_GROUP6",
    [7] = "IPVS_DAEMON_ATTR_MCAST_PORT", [8] = "IPVS_DAEMON_ATTR_MCAST_TTL",
}
local stats_attrs = {
    [1] = "IPVS_STATS_ATTR_CONNS", [2] = "IPVS_STATS_ATTR_INPKTS", [3] = "IPVS_STATS_ATTR_OUTPKTS",
    [4] = "IPVS_STATS_ATTR_INBYTES", [5] = "IPVS_STATS_ATTR_OUTBYTES", [6] = "IPVS_STATS_ATTR_CPS",
    [7] = "IPVS_STATS_ATTR_INPPS", [8] = "IPVS_STATS_ATTR_OUTPPS", [9] = "IPVS_STATS_ATTR_INBPS",
    [10] = "IPVS_STATS_ATTR_OUTBPS", [11] = "IPVS_STATS_ATTR_PAD",
}
local info_attrs = { [1] = "IPVS_INFO_ATTR_VERSION", [2] = "IPVS_INFO_ATTR_CONN_TAB_SIZE" }
local families = { [AF_INET] = "AF_INET", [AF_INET6] = "AF_INET6" }
local protocols = { [6] = "TCP", [17] = "UDP", [132] = "SCTP" }
local fwd_methods = {
    [0] = "masquerading (NAT)", [1] = "local", [2] = "tunnel (IPIP)",
    [3] = "direct routing", [4] = "bypass",
}

local f = {
    cmd = ProtoField.uint8("ipvs_nl.cmd", "Command", base.DEC, cmds),
    version = ProtoField.uint8("ipvs_nl.version", "Family version", base.DEC),
    attr_len = ProtoField.uint16("ipvs_nl.attr.len", "Length", base.DEC),
    attr_type = ProtoField.uint16("ipvs_nl.attr.type", "Type", base.DEC, nil, NLA_TYPE_MASK),
    timeout_tcp = ProtoField.uint32("ipvs_nl.timeout_tcp", "TCP timeout (s)", base.DEC),
    timeout_tcp_fin = ProtoField.uint32("ipvs_nl.timeout_tcp_fin", "TCP FIN timeout (s)", base.DEC),
    timeout_udp = ProtoField.uint32("ipvs_nl.timeout_udp", "UDP timeout (s)", base.DEC),
    svc_af = ProtoField.uint16("ipvs_nl.svc.af", "Address family", base.DEC, families),
    svc_protocol = ProtoField.uint16("ipvs_nl.svc.protocol", "Protocol", base.DEC, protocols),
    svc_addr = ProtoField.ipv4("ipvs_nl.svc.addr", "Virtual address"),
    svc_addr6 = ProtoField.ipv6("ipvs_nl.svc.addr6", "Virtual address"),
    svc_port = ProtoField.uint16("ipvs_nl.svc.port", "Virtual port", base.DEC),
    svc_fwmark = ProtoField.uint32("ipvs_nl.svc.fwmark", "Firewall mark", base.HEX),
    svc_sched = ProtoField.string("ipvs_nl.svc.sched_name", "Scheduler"),
    svc_flags = ProtoField.uint32("ipvs_nl.svc.flags", "Flags", base.HEX),
    svc_flags_mask = ProtoField.uint32("ipvs_nl.svc.flags_mask", "Flags mask", base.HEX),
    svc_timeout = ProtoField.uint32("ipvs_nl.svc.timeout", "Persistence timeout (s)", base.DEC),
    svc_netmask = ProtoField.uint32("ipvs_nl.svc.netmask", "Persistence netmask", base.HEX),
    svc_pe = ProtoField.string("ipvs_nl.svc.pe_name", "Persistence engine"),
    dest_addr = ProtoField.ipv4("ipvs_nl.dest.addr", "Real server address"),
    dest_addr6 = ProtoField.ipv6("ipvs_nl.dest.addr6", "Real server address"),
    dest_port = ProtoField.uint16("ipvs_nl.dest.port", "Real server port", base.DEC),
    dest_fwd = ProtoField.uint32("ipvs_nl.dest.fwd_method", "Forwarding method", base.DEC, fwd_methods),
    dest_weight = ProtoField.int32("ipvs_nl.dest.weight", "Weight", base.DEC),
    dest_u_thresh = ProtoField.uint32("ipvs_nl.dest.u_thresh", "Upper threshold", base.DEC),
    dest_l_thresh = ProtoField.uint32("ipvs_nl.dest.l_thresh", "Lower threshold", base.DEC),
    dest_active = ProtoField.uint32("ipvs_nl.dest.active_conns", "Active connections", base.DEC),
    dest_inact = ProtoField.uint32("ipvs_nl.dest.inact_conns", "Inactive connections", base.DEC),
    dest_persist = ProtoField.uint32("ipvs_nl.dest.persist_conns", "Persistent connections", base.DEC),
    dest_af = ProtoField.uint16("ipvs_nl.dest.addr_family", "Address family", base.DEC, families),
    dest_tun_type = ProtoField.uint8("ipvs_nl.dest.tun_type", "Tunnel type", base.DEC),
    dest_tun_port = ProtoField.uint16("ipvs_nl.dest.tun_port", "Tunnel port", base.DEC),
    dest_tun_flags = ProtoField.uint16("ipvs_nl.dest.tun_flags", "Tunnel flags", base.HEX),
    daemon_state = ProtoField.uint32("ipvs_nl.daemon.state", "State", base.HEX),
    daemon_ifn = ProtoField.string("ipvs_nl.daemon.mcast_ifn", "Multicast interface"),
    daemon_syncid = ProtoField.uint32("ipvs_nl.daemon.sync_id", "Sync id", base.DEC),
    stat = ProtoField.uint64("ipvs_nl.stats.value", "Value", base.DEC),
    info_version = ProtoField.uint32("ipvs_nl.info.version", "IPVS version", base.HEX),
    info_conn_tab = ProtoField.uint32("ipvs_nl.info.conn_tab_size", "Connection table size", base.DEC),
    value = ProtoField.bytes("ipvs_nl.attr.value", "Value"),
}
ipvs.fields = {}
for _, field in pairs(f) do
    table.insert(ipvs.fields, field)
end

local ett = {}

-- Calls fn(type, nested, payload_range, attr_range) for each attribute in range [off, stop).
local function each_attr(tvb, off, stop, fn)
    while off + 4 <= stop do
        local len = tvb(off, 2):le_uint()
        if len < 4 or off + len > stop then
            return
        end
        local raw_type = tvb(off + 2, 2):le_uint()
        local payload = len > 4 and tvb(off + 4, len - 4) or nil
        fn(bit32.band(raw_type, NLA_TYPE_MASK), bit32.band(raw_type, NLA_F_NESTED) ~= 0,
            payload, tvb(off, len))
        off = off + bit32.band(len + 3, bit32.bnot(3))
    end
end

-- Adds an attribute subtree "NAME" with its length and type.
local function attr_tree(tree, names, kind, attr)
    local name = names[kind] or ("attribute " .. kind)
    local t = tree:add(ipvs, attr, name)
    t:add_le(f.attr_len, attr(0, 2))
    t:add_le(f.attr_type, attr(2, 2))
    return t
end

local function add_addr(t, f4, f6, payload, af)
    if payload == nil then
        return nil
    end
    if af == AF_INET6 and payload:len() >= 16 then
        t:add(f6, payload(0, 16))
        return tostring(payload(0, 16):ipv6())
    elseif payload:len() >= 4 then
        t:add(f4, payload(0, 4))
        return tostring(payload(0, 4):ipv4())
    end
    return nil
end

-- Finds the u16 address family attribute `kind` inside a nested attribute.
local function find_af(tvb, nested, kind)
    local af
    if nested == nil then
        return nil
    end
    each_attr(tvb, nested:offset(), nested:offset() + nested:len(), function(k, _, p)
        if k == kind and p ~= nil and p:len() >= 2 then
            af = p(0, 2):le_uint()
        end
    end)
    return af
end

local function dissect_stats(tvb, tree, payload)
    each_attr(tvb, payload:offset(), payload:offset() + payload:len(), function(k, _, p, a)
        local t = attr_tree(tree, stats_attrs, k, a)
        if p ~= nil and (p:len() == 4 or p:len() == 8) then
            t:add_le(f.stat, p)
            t:append_text(": " .. tostring(p:le_uint64()))
        end
    end)
end

-- Adds a u32/u16/u8 field for a fixed-size attribute; returns its value or nil.
local function add_uint(t, field, p, size)
    if p ~= nil and p:len() >= size then
        local r = p(0, size)
        t:add_le(field, r)
        t:append_text(": " .. r:le_uint())
        return r:le_uint()
    end
    return nil
end

local function add_string(t, field, p)
    if p ~= nil then
        local s = p:stringz()
        t:add(field, p, s)
        t:append_text(": " .. s)
        return s
    end
    return nil
end

-- Returns a one-line summary "TCP 192.0.2.10:30080 rr".
local function dissect_service(tvb, tree, payload)
    local af = find_af(tvb, payload, 1) or AF_INET
    local proto, addr, port, sched, fwmark
    each_attr(tvb, payload:offset(), payload:offset() + payload:len(), function(k, _, p, a)
        local t = attr_tree(tree, svc_attrs, k, a)
        if k == 1 then add_uint(t, f.svc_af, p, 2)
        elseif k == 2 then proto = add_uint(t, f.svc_protocol, p, 2)
        elseif k == 3 then
            addr = add_addr(t, f.svc_addr, f.svc_addr6, p, af)
            if addr then t:append_text(": " .. addr) end
        elseif k == 4 and p ~= nil and p:len() >= 2 then
            t:add(f.svc_port, p(0, 2))
            port = p(0, 2):uint()
            t:append_text(": " .. port)
        elseif k == 5 then fwmark = add_uint(t, f.svc_fwmark, p, 4)
        elseif k == 6 then sched = add_string(t, f.svc_sched, p)
        elseif k == 7 and p ~= nil and p:len() >= 8 then
            t:add_le(f.svc_flags, p(0, 4))
            t:add_le(f.svc_flags_mask, p(4, 4))
        elseif k == 8 then add_uint(t, f.svc_timeout, p, 4)
        elseif k == 9 then add_uint(t, f.svc_netmask, p, 4)
        elseif (k == 10 or k == 12) and p ~= nil then dissect_stats(tvb, t, p)
        elseif k == 11 then add_string(t, f.svc_pe, p)
        elseif p ~= nil then t:add(f.value, p)
        end
    end)
    local where
    if fwmark then
        where = "fwmark " .. fwmark
    else
        local host = addr or "?"
        if af == AF_INET6 then host = "[" .. host .. "]" end
        where = (protocols[proto] or tostring(proto or "?")) .. " " .. host .. ":" .. tostring(port or "?")
    end
    return where .. ((sched and sched ~= "") and (" " .. sched) or "")
end

local function dissect_dest(tvb, tree, payload, svc_af)
    local af = find_af(tvb, payload, 11) or svc_af or AF_INET
    local addr, port, fwd
    each_attr(tvb, payload:offset(), payload:offset() + payload:len(), function(k, _, p, a)
        local t = attr_tree(tree, dest_attrs, k, a)
        if k == 1 then
            addr = add_addr(t, f.dest_addr, f.dest_addr6, p, af)
            if addr then t:append_text(": " .. addr) end
        elseif k == 2 and p ~= nil and p:len() >= 2 then
            t:add(f.dest_port, p(0, 2))
            port = p(0, 2):uint()
            t:append_text(": " .. port)
        elseif k == 3 then
            fwd = add_uint(t, f.dest_fwd, p, 4)
        elseif k == 4 then add_uint(t, f.dest_weight, p, 4)
        elseif k == 5 then add_uint(t, f.dest_u_thresh, p, 4)
        elseif k == 6 then add_uint(t, f.dest_l_thresh, p, 4)
        elseif k == 7 then add_uint(t, f.dest_active, p, 4)
        elseif k == 8 then add_uint(t, f.dest_inact, p, 4)
        elseif k == 9 then add_uint(t, f.dest_persist, p, 4)
        elseif (k == 10 or k == 12) and p ~= nil then dissect_stats(tvb, t, p)
        elseif k == 11 then add_uint(t, f.dest_af, p, 2)
        elseif k == 13 then add_uint(t, f.dest_tun_type, p, 1)
        elseif k == 14 and p ~= nil and p:len() >= 2 then t:add(f.dest_tun_port, p(0, 2))
        elseif k == 15 then add_uint(t, f.dest_tun_flags, p, 2)
        elseif p ~= nil then t:add(f.value, p)
        end
    end)
    local host = addr or "?"
    if af == AF_INET6 then host = "[" .. host .. "]" end
    return "-> " .. host .. ":" .. tostring(port or "?") ..
        (fwd and fwd_methods[fwd] and (" " .. fwd_methods[fwd]) or "")
end

local function dissect_daemon(tvb, tree, payload)
    each_attr(tvb, payload:offset(), payload:offset() + payload:len(), function(k, _, p, a)
        local t = attr_tree(tree, daemon_attrs, k, a)
        if k == 1 then add_uint(t, f.daemon_state, p, 4)
        elseif k == 2 then add_string(t, f.daemon_ifn, p)
        elseif k == 3 then add_uint(t, f.daemon_syncid, p, 4)
        elseif p ~= nil then t:add(f.value, p)
        end
    end)
end

function ipvs.dissector(tvb, pinfo, tree)
    if tvb:len() < 4 then
        return 0
    end
    local cmd = tvb(0, 1):uint()
    local root = tree:add(ipvs, tvb(), "IP Virtual Server")
    root:add(f.cmd, tvb(0, 1))
    root:add(f.version, tvb(1, 1))
    local summary = {}
    local svc_af

    if cmd == IPVS_CMD_SET_INFO or cmd == IPVS_CMD_GET_INFO then
        each_attr(tvb, 4, tvb:len(), function(k, _, p, a)
            local t = attr_tree(root, info_attrs, k, a)
            if k == 1 then add_uint(t, f.info_version, p, 4)
            elseif k == 2 then add_uint(t, f.info_conn_tab, p, 4)
            end
        end)
    else
        each_attr(tvb, 4, tvb:len(), function(k, _, p, a)
            local t = attr_tree(root, cmd_attrs, k, a)
            if p == nil then
                return
            end
            if k == 1 then
                svc_af = find_af(tvb, p, 1)
                table.insert(summary, dissect_service(tvb, t, p))
            elseif k == 2 then
                table.insert(summary, dissect_dest(tvb, t, p, svc_af))
            elseif k == 3 then dissect_daemon(tvb, t, p)
            elseif k == 4 then add_uint(t, f.timeout_tcp, p, 4)
            elseif k == 5 then add_uint(t, f.timeout_tcp_fin, p, 4)
            elseif k == 6 then add_uint(t, f.timeout_udp, p, 4)
            else t:add(f.value, p)
            end
        end)
    end

    local text = (cmds[cmd] or ("IPVS command " .. cmd))
    if #summary > 0 then
        text = text .. " " .. table.concat(summary, " ")
    end
    root:append_text(": " .. text)
    pinfo.cols.protocol:set("IPVS")
    pinfo.cols.info:set(text)
    return tvb:len()
end

DissectorTable.get("genl.family"):add("IPVS", ipvs)
