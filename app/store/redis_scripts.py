"""The Lua scripts that write the Redis store: each runs atomically on the server.

Beside the records (see :mod:`.redis`) the scripts keep, under the key prefix:

- ``meta``: a hash, response id → ``{"o": owner field, "s": size, "e": expires_at or -1}``,
  kept after the record's TTL expired, so its bytes can still be taken off;
- ``index`` and ``index:<owner field>``: sorted sets of response ids by write
  order (``seq``), all owners' and one owner's: the oldest come first;
- ``usage``: a hash, owner field → bytes, and ``*`` → the total.

The conversation scripts keep ``conv:<id>`` (a hash ``owner``, ``conversation``) and
``conv:<id>:items`` (a list of item JSON, oldest first) together: written, expired and
deleted as one.

Redis expires records without running code, so every write first forgets up
to :data:`TRIM` of the oldest responses whose expiry has passed.
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

#: KEYS[1] prefix; ARGV: id, owner field, size, now, ttl (0: none), max bytes, max bytes of a key (0: none),
#: response JSON, input JSON, item ids JSON, then (item id, copy JSON) pairs.
PUT = "#!lua\n" + _FORGET + """
local id, owner, size, now, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local max_total, max_owner = tonumber(ARGV[6]), tonumber(ARGV[7])
for _, rid in ipairs(redis.call('ZRANGE', P .. 'index', 0, %(trim)d - 1)) do
    local raw = redis.call('HGET', P .. 'meta', rid)
    local expires = raw and cjson.decode(raw).e or 0
    if expires ~= -1 and expires <= now then forget(rid) else break end
end
forget(id)
local function used(field) return tonumber(redis.call('HGET', P .. 'usage', field) or '0') end
if owner ~= '' and max_owner > 0 then
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
redis.call('HINCRBY', P .. 'usage', owner, size)
redis.call('HINCRBY', P .. 'usage', '*', size)
""" % {"trim": TRIM}

#: KEYS[1] prefix; ARGV: id, the asking owner field, "1" when the store is shared. Returns 1 when deleted.
#: ``allow-oom``: a DELETE must work when Redis is out of memory (it only frees).
DELETE = "#!lua flags=allow-oom\n" + _FORGET + """
local owner = redis.call('HGET', P .. 'resp:' .. ARGV[1], 'owner')
if not owner or (ARGV[3] ~= '1' and owner ~= ARGV[2]) then return 0 end
forget(ARGV[1])
return 1
"""

#: The owner check of the conversation scripts: KEYS[1] the conversation's hash, ARGV[1] the asking owner
#: field, ARGV[2] "1" when the store is shared. Returns from the script with 0 when the caller may not touch it.
_CONVERSATION_OWNED = """
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner or (ARGV[2] ~= '1' and owner ~= ARGV[1]) then return 0 end
"""
#: Keeps KEYS[1] and KEYS[2] (a conversation's hash and its item list) for ARGV[3] seconds (0: for good).
_CONVERSATION_KEEP = """
for _, key in ipairs(KEYS) do
    if tonumber(ARGV[3]) > 0 then redis.call('EXPIRE', key, ARGV[3]) else redis.call('PERSIST', key) end
end
"""

#: KEYS: the conversation's hash, its item list; ARGV: owner field, shared, ttl, conversation JSON.
#: A conversation another owner holds is left alone (0).
PUT_CONVERSATION = "#!lua\n" + """
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner and owner ~= ARGV[1] and ARGV[2] ~= '1' then return 0 end
redis.call('HSET', KEYS[1], 'owner', owner or ARGV[1], 'conversation', ARGV[4])
""" + _CONVERSATION_KEEP + "return 1"

#: KEYS: the conversation's hash, its item list; ARGV: owner field, shared, ttl, then the items' JSON.
APPEND_ITEMS = "#!lua\n" + _CONVERSATION_OWNED + """
for i = 4, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
""" + _CONVERSATION_KEEP + "return 1"

#: KEYS: the conversation's hash, its item list; ARGV: owner field, shared.
DELETE_CONVERSATION = "#!lua flags=allow-oom\n" + _CONVERSATION_OWNED + """
redis.call('DEL', KEYS[1], KEYS[2])
return 1
"""

#: KEYS: the conversation's hash, its item list; ARGV: owner field, shared, ttl (unused), the item's id.
DELETE_ITEM = "#!lua flags=allow-oom\n" + _CONVERSATION_OWNED + """
for _, raw in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
    local ok, item = pcall(cjson.decode, raw)
    if ok and type(item) == 'table' and item.id == ARGV[4] then
        redis.call('LREM', KEYS[2], 1, raw)
        return 1
    end
end
return 0
"""
