// Shared by the UI tests: real run files made with core's synthetic runs and writer.
#pragma once

#include "lockstep/core/run_db.h"
#include "lockstep/core/synthetic.h"

#include <QFile>
#include <QImage>
#include <QSet>
#include <QString>

namespace lockstep::uitest {

// Writes a synthetic run to `path`; returns an empty string or core's error.
inline QString makeRunFile(const QString& path, int worldSize, int steps, int buckets, double commFraction,
                           int64_t bucketCapMb, const QString& name, int stragglerRank = -1)
{
    core::SyntheticParams p;
    p.worldSize = worldSize;
    p.steps = steps;
    p.buckets = buckets;
    p.commFraction = commFraction;
    p.stragglerRank = stragglerRank;
    p.stragglerDelayNs = stragglerRank >= 0 ? 3'000'000 : 0;
    core::Run run = core::makeSyntheticRun(p);
    run.config.name = name.toStdString();
    run.config.bucketCapBytes = bucketCapMb << 20;
    auto status = core::saveRun(run, path.toStdString(), core::RunWriter::Mode::Overwrite);
    return status ? QString() : QString::fromStdString(status.error().message);
}

inline void writeForeignFile(const QString& path)
{
    QFile f(path);
    if (f.open(QIODevice::WriteOnly))
        f.write("this is not a run database, just some text that ends in .db\n");
}

inline int distinctColors(const QImage& image)
{
    QSet<QRgb> colors;
    for (int y = 0; y < image.height(); y += 3)
        for (int x = 0; x < image.width(); x += 3)
            colors.insert(image.pixel(x, y));
    return int(colors.size());
}

} // namespace lockstep::uitest
