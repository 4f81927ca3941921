// Ranks grouped by host (see host_groups.h).
#include "host_groups.h"

#include "format.h"

#include <QObject>
#include <QStringList>

#include <algorithm>
#include <map>

namespace lockstep::ui {

std::vector<HostGroup> hostGroups(const core::Run& run, std::span<const int32_t> ranks)
{
    std::map<int32_t, const std::string*> hostOf;
    for (const core::RankInfo& r : run.ranks)
        hostOf[r.rank] = &r.host;
    static const std::string kNone;
    std::vector<HostGroup> out;
    std::map<std::string, size_t> index; // host -> position in out
    for (int32_t rank : ranks) {
        auto it = hostOf.find(rank);
        const std::string& host = it != hostOf.end() ? *it->second : kNone;
        auto [pos, added] = index.try_emplace(host, out.size());
        if (added)
            out.push_back(HostGroup{displayText(host, 60), {}});
        out[pos->second].ranks.push_back(rank);
    }
    return out;
}

QString hostTitle(const HostGroup& host)
{
    QStringList parts;
    for (size_t i = 0; i < host.ranks.size();) {
        size_t j = i + 1;
        while (j < host.ranks.size() && host.ranks[j] == host.ranks[j - 1] + 1)
            ++j;
        parts << (j - i > 1 ? QStringLiteral("%1–%2").arg(host.ranks[i]).arg(host.ranks[j - 1]) : QString::number(host.ranks[i]));
        i = j;
    }
    const QString name = host.name.isEmpty() ? QObject::tr("(host not recorded)") : host.name;
    return QStringLiteral("%1 · %2 %3").arg(name, host.ranks.size() == 1 ? QObject::tr("rank") : QObject::tr("ranks"),
                                             parts.join(QStringLiteral(", ")));
}

} // namespace lockstep::ui
