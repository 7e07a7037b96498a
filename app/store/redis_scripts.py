"""The Lua scripts that write the Redis store: each runs atomically on the server.

Beside the records (see :mod:`.redis`) the scripts keep, under the key prefix:

- ``meta``: a hash, response id → ``{"o": owner field, "s": size, "e": expires_at or -1}``,
  kept after the record's TTL expired, so its bytes can still be taken off;
- ``index`` and ``index:<owner field>``: sorted sets of response ids by write
  order (``seq``), all owners' and one owner's: the oldest come first;
- ``usage``: a hash, owner field → bytes, and ``*`` → the total.

The conversation scripts keep ``conv:<id>`` (a hash ``owner``, ``conversation``) and
``conv:<id>:items`` (a list of item JSON, oldest first) together: written, expired and
deleted as one. Their bytes (the JSON of both) are counted in ``usage`` too, and in
``usage``'s ``c:<owner field>`` and ``c:*`` alone (what evicting responses cannot free),
with ``convmeta`` (conversation id → ``{"o", "s", "e"}``) and ``convexp`` (ids by
expiry) to take an expired one's bytes off.

Redis expires records without running code, so every write first forgets up
to :data:`TRIM` of the oldest responses, and as many conversations, whose expiry has passed.
"""

from __future__ import annotations

#: Expired responses forgotten per write, at most (a backlog is cleared over the next writes).
TRIM = 64

_FORGET = """
local P = KEYS[1]
local function forget(rid)
    local raw = redis.call('HGET', P .. 'meta', rid)
    redis.call('ZREM', P .. 'index', rid)
    if raw then
        local meta = cjson.decode(raw)
        redis.call('HINCRBY', P .. 'usage', meta.o, -meta.s)
        redis.call('HINCRBY', P .. 'usage', '*', -meta.s)
        redis.call('ZREM', P .. 'index:' .. meta.o, rid)
        redis.call('HDEL', P .. 'meta', rid)
    end
    local key = P .. 'resp:' .. rid
    local record = redis.call('HMGET', key, 'owner', 'items')
    local owner, ok, items = record[1], pcall(cjson.decode, record[2] or '[]')
    if owner and ok and type(items) == 'table' then
        -- only the item copies this response stored last; a later response's copy stays
        for _, iid in ipairs(items) do
            local copy = redis.call('HGET', P .. 'item:' .. iid, owner)
            if copy then
                local decoded, parsed = pcall(cjson.decode, copy)
                if not decoded or type(parsed) ~= 'table' or parsed.response == rid then
                    redis.call('HDEL', P .. 'item:' .. iid, owner)
                end
            end
        end
    end
    redis.call('DEL', key)
end
"""

#: What every write script shares: forgetting a response (``forget``), the byte totals (``used``), trimming what
#: expired (``trim``), a conversation's bytes (``resize``) and room for more (``make_room``).
_WRITE = _FORGET + """
local function used(field) return tonumber(redis.call('HGET', P .. 'usage', field) or '0') end
local function count(owner, delta, fields)
    fields = fields or ''
    redis.call('HINCRBY', P .. 'usage', fields .. owner, delta)
    redis.call('HINCRBY', P .. 'usage', fields .. '*', delta)
end
-- a conversation's bytes: its meta entry and the totals (its owner's and all; 'c:' fields count conversations
-- alone, what no eviction can free)
local function resize(cid, owner, delta, expires)
    local raw = redis.call('HGET', P .. 'convmeta', cid)
    local meta = raw and cjson.decode(raw) or {o = owner, s = 0, e = -1}
    meta.s = meta.s + delta
    if expires then meta.e = expires end
    redis.call('HSET', P .. 'convmeta', cid, cjson.encode(meta))
    if meta.e ~= -1 then redis.call('ZADD', P .. 'convexp', meta.e, cid) else redis.call('ZREM', P .. 'convexp', cid) end
    count(meta.o, delta)
    count(meta.o, delta, 'c:')
end
local function uncount(cid)
    local raw = redis.call('HGET', P .. 'convmeta', cid)
    if raw then
        local meta = cjson.decode(raw)
        count(meta.o, -meta.s)
        count(meta.o, -meta.s, 'c:')
        redis.call('HDEL', P .. 'convmeta', cid)
    end
    redis.call('ZREM', P .. 'convexp', cid)
end
local function trim(now)
    for _, rid in ipairs(redis.call('ZRANGE', P .. 'index', 0, %(trim)d - 1)) do
        local raw = redis.call('HGET', P .. 'meta', rid)
        local expires = raw and cjson.decode(raw).e or 0
        if expires ~= -1 and expires <= now then forget(rid) else break end
    end
    for _, cid in ipairs(redis.call('ZRANGEBYSCORE', P .. 'convexp', '-inf', now, 'LIMIT', 0, %(trim)d)) do
        uncount(cid)
    end
end
-- evict the oldest responses until ``size`` more bytes fit the owner's quota and the store's; false (and nothing
-- evicted) when conversations alone leave no room for them
local function make_room(owner, size, max_total, max_owner)
    if size <= 0 then return true end
    local per_owner = owner ~= '' and max_owner > 0
    if (per_owner and used('c:' .. owner) + size > max_owner) or (max_total > 0 and used('c:*') + size > max_total) then
        return false
    end
    if per_owner then
        while used(owner) + size > max_owner do
            local oldest = redis.call('ZRANGE', P .. 'index:' .. owner, 0, 0)[1]
            if not oldest then break end
            forget(oldest)
        end
    end
    if max_total > 0 then
        while used('*') + size > max_total do
            local oldest = redis.call('ZRANGE', P .. 'index', 0, 0)[1]
            if not oldest then break end
            forget(oldest)
        end
    end
    return true
end
""" % {"trim": TRIM}

#: KEYS[1] prefix; ARGV: id, owner field, size, now, ttl (0: none), max bytes, max bytes of a key (0: none),
#: response JSON, input JSON, item ids JSON, then (item id, copy JSON) pairs. Returns -1 when it does not fit.
PUT = "#!lua\n" + _WRITE + """
local id, owner, size, now, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local max_total, max_owner = tonumber(ARGV[6]), tonumber(ARGV[7])
trim(now)
forget(id)
if not make_room(owner, size, max_total, max_owner) then return -1 end
local key = P .. 'resp:' .. id
redis.call('HSET', key, 'owner', owner, 'response', ARGV[8], 'input', ARGV[9], 'items', ARGV[10])
local function keep(k) if ttl > 0 then redis.call('EXPIRE', k, ttl) else redis.call('PERSIST', k) end end
keep(key)
for i = 11, #ARGV, 2 do
    redis.call('HSET', P .. 'item:' .. ARGV[i], owner, ARGV[i + 1])
    keep(P .. 'item:' .. ARGV[i])
end
local seq = redis.call('INCR', P .. 'seq')
redis.call('ZADD', P .. 'index', seq, id)
redis.call('ZADD', P .. 'index:' .. owner, seq, id)
redis.call('HSET', P .. 'meta', id, cjson.encode({o = owner, s = size, e = ttl > 0 and now + ttl or -1}))
count(owner, size)
return 1
"""

#: KEYS[1] prefix; ARGV: id, the asking owner field, "1" when the store is shared. Returns 1 when deleted.
#: ``allow-oom``: a DELETE must work when Redis is out of memory (it only frees).
DELETE = "#!lua flags=allow-oom\n" + _FORGET + """
local owner = redis.call('HGET', P .. 'resp:' .. ARGV[1], 'owner')
if not owner or (ARGV[3] ~= '1' and owner ~= ARGV[2]) then return 0 end
forget(ARGV[1])
return 1
"""

#: The conversation scripts' start: KEYS[1] the prefix, KEYS[2] the conversation's hash, KEYS[3] its item list;
#: ARGV[1] the asking owner field, ARGV[2] "1" when the store is shared, ARGV[3] the retention (seconds, 0: for
#: good), ARGV[4] now, ARGV[5] and ARGV[6] the store's and a key's quota (0: none), ARGV[7] the conversation's id.
_CONVERSATION = _WRITE + """
local conv, items, now, ttl = KEYS[2], KEYS[3], tonumber(ARGV[4]), tonumber(ARGV[3])
local max_total, max_owner, cid = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local expires = ttl > 0 and now + ttl or -1
trim(now)
local function keep_both()
    for _, key in ipairs({conv, items}) do
        if ttl > 0 then redis.call('EXPIRE', key, ttl) else redis.call('PERSIST', key) end
    end
end
"""
#: Returns from a conversation script with 0 when the caller may not touch the conversation (or it is gone).
_CONVERSATION_OWNED = """
local owner = redis.call('HGET', conv, 'owner')
if not owner or (ARGV[2] ~= '1' and owner ~= ARGV[1]) then return 0 end
"""

#: ARGV[8]: the conversation's JSON. A conversation another owner holds is left alone (0); -1: no room for it.
PUT_CONVERSATION = "#!lua\n" + _CONVERSATION + """
local owner = redis.call('HGET', conv, 'owner')
if owner and owner ~= ARGV[1] and ARGV[2] ~= '1' then return 0 end
owner = owner or ARGV[1]
local delta = #ARGV[8] - #(redis.call('HGET', conv, 'conversation') or '')
if not make_room(owner, delta, max_total, max_owner) then return -1 end
redis.call('HSET', conv, 'owner', owner, 'conversation', ARGV[8])
resize(cid, owner, delta, expires)
keep_both()
return 1
"""

#: ARGV[8…]: the items' JSON. -1: no room for them.
APPEND_ITEMS = "#!lua\n" + _CONVERSATION + _CONVERSATION_OWNED + """
local added = 0
for i = 8, #ARGV do added = added + #ARGV[i] end
if not make_room(owner, added, max_total, max_owner) then return -1 end
for i = 8, #ARGV do redis.call('RPUSH', items, ARGV[i]) end
resize(cid, owner, added, expires)
keep_both()
return 1
"""

DELETE_CONVERSATION = "#!lua flags=allow-oom\n" + _CONVERSATION + _CONVERSATION_OWNED + """
redis.call('DEL', conv, items)
uncount(cid)
return 1
"""

#: ARGV[8]: the item's id.
DELETE_ITEM = "#!lua flags=allow-oom\n" + _CONVERSATION + _CONVERSATION_OWNED + """
for _, raw in ipairs(redis.call('LRANGE', items, 0, -1)) do
    local ok, item = pcall(cjson.decode, raw)
    if ok and type(item) == 'table' and item.id == ARGV[8] then
        redis.call('LREM', items, 1, raw)
        resize(cid, owner, -#raw, nil)
        return 1
    end
end
return 0
"""
