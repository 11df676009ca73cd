--[[
job_submit/lua equivalent of slurmpod's default policy (deploy/kubernetes/policy.yaml), for the bench:
`make bench` compares no plugin, this script, and job_submit/slurmpod on the same jobs.
Install as <slurm.conf dir>/job_submit.lua with JobSubmitPlugins=lua.
Ref: https://slurm.schedmd.com/job_submit_plugins.html#lua

Same rules, same messages, with two differences job_submit/lua imposes:
- it cannot set warn_signal/warn_time (not in its writable job_desc fields in 24.11 or 26.05), so the
  preemptible tier's grace signal (--signal=USR1@120) is not applied here;
- it has no cheap view of the user's supplementary groups, so high-tier access is by account only.
And one it cannot fix: when this script raises, job_submit/lua accepts the job.
--]]

local NO_VAL = 4294967294
local NO_VAL16 = 65534
local INFINITE = 4294967295

local CPU_ONLY = { cpu = true }
local TIERS = { -- lowest first, as in the policy
  { name = "preemptible", partitions = { preempt = true }, qos = { preemptible = true },
    requeue = true, max_time = 1440 },
  { name = "normal", partitions = { main = true }, qos = { normal = true } },
  { name = "high", partitions = { high = true }, qos = { high = true }, max_time = 240,
    accounts = { inference = true } },
}
local DEFAULT_TIER = TIERS[2]

local function gpus(tres)
  if tres == nil then return 0 end
  local total = 0
  for entry in string.gmatch(tres, "[^,;]+") do
    if string.match(entry, "^gres[/:]gpu") then
      local n = string.match(entry, "[:=](%d+)$")
      total = total + (tonumber(n) or 1)
    end
  end
  return total
end

local function partitions(job_desc)
  local list = {}
  for p in string.gmatch(job_desc.partition or "", "[^,]+") do list[#list + 1] = p end
  return list
end

local function tiers_of(job_desc)
  local found = {}
  local parts = partitions(job_desc)
  for _, tier in ipairs(TIERS) do
    local hit = job_desc.qos ~= nil and tier.qos[job_desc.qos]
    for _, p in ipairs(parts) do hit = hit or tier.partitions[p] end
    if hit then found[#found + 1] = tier end
  end
  if #found == 0 then found[1] = DEFAULT_TIER end
  return found
end

local function decide(job_desc)
  local has_gpus = gpus(job_desc.tres_per_node) + gpus(job_desc.tres_per_job) > 0
  for _, p in ipairs(partitions(job_desc)) do
    if has_gpus and CPU_ONLY[p] then
      return slurm.ERROR, "partition " .. p .. " has no GPUs; submit GPU jobs to a GPU partition"
    end
  end
  local tiers = tiers_of(job_desc)
  for _, tier in ipairs(tiers) do
    if tier.accounts and not (job_desc.account and tier.accounts[job_desc.account]) then
      return slurm.ERROR, "user " .. tostring(job_desc.user_name) .. " may not use the " .. tier.name .. " tier"
    end
  end
  local notes = {}
  local cap_tier = nil
  for _, tier in ipairs(tiers) do
    if tier.max_time and (cap_tier == nil or tier.max_time < cap_tier.max_time) then cap_tier = tier end
  end
  if cap_tier then
    local limit = job_desc.time_limit
    if limit == nil or limit == NO_VAL then
      job_desc.time_limit = cap_tier.max_time
      notes[#notes + 1] = "time limit set to the " .. cap_tier.name .. " cap of " .. cap_tier.max_time .. " min"
    elseif limit > cap_tier.max_time then
      local asked = (limit == INFINITE) and "UNLIMITED" or (limit .. " min")
      return slurm.ERROR, "time limit " .. asked .. " exceeds the " .. cap_tier.name .. " tier's cap of "
        .. cap_tier.max_time .. " min"
    end
  end
  if tiers[1].requeue and job_desc.requeue ~= 1 then
    job_desc.requeue = 1
    notes[#notes + 1] = tiers[1].name .. " jobs may be preempted: requeue enabled"
  end
  return slurm.SUCCESS, table.concat(notes, "; ")
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local rc, msg = decide(job_desc)
  if msg ~= "" then slurm.log_user(msg) end
  return rc
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  local rc, msg = decide(job_desc)
  if msg ~= "" then slurm.log_user(msg) end
  return rc
end

return slurm.SUCCESS
