// Ranks grouped by the host they ran on (RankInfo::host, docs/hosts.md): the timeline's host
// header rows and the rank heatmap's host bands. A run whose ranks all ran on one host has one
// group, and the views look exactly as they do without grouping.
#pragma once

#include "lockstep/core/types.h"

#include <QString>

#include <span>
#include <vector>

namespace lockstep::ui {

struct HostGroup {
    QString name;               // RankInfo::host as shown ("" when not recorded)
    std::vector<int32_t> ranks; // ascending
};

// The hosts of `ranks` (ascending), in the order of their first rank; a rank the run has no
// RankInfo for goes with the ranks whose host is not recorded.
std::vector<HostGroup> hostGroups(const core::Run& run, std::span<const int32_t> ranks);

// "host1 · ranks 2–3", "host0 · rank 0", "host0 · ranks 0, 2, 5" (runs of consecutive ranks
// written as ranges); "(host not recorded)" for a nameless host.
QString hostTitle(const HostGroup& host);

} // namespace lockstep::ui
